package dns

import "testing"

func TestServiceIP(t *testing.T) {
	for _, tc := range []struct{ cidr, want string }{
		{"10.96.0.0/12", "10.96.0.10"},
		{"10.0.0.248/29", ""}, // too small: the 10th address is outside
		{"10.0.0.240/28", "10.0.0.250"},
		{"fd00::/108", ""},
		{"not a cidr", ""},
	} {
		ip, err := ServiceIP(tc.cidr)
		got := ""
		if err == nil {
			got = ip.String()
		}
		if got != tc.want {
			t.Errorf("ServiceIP(%s) = %q (%v), want %q", tc.cidr, got, err, tc.want)
		}
	}
}
