package core

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartRefusesBadServiceAccountIssuers: bad --service-account-issuer values are a
// clear error from Start, in upstream's words, before anything is started or written.
func TestStartRefusesBadServiceAccountIssuers(t *testing.T) {
	for _, tc := range []struct {
		issuers []string
		want    string
	}{
		{[]string{"https://a.example", ""}, "service-account-issuer should not be an empty string"},
		{[]string{"https://a.example", "https://a.example"}, `service-account-issuer "https://a.example" is already specified`},
		{[]string{"https://a.example", ":6443"}, `service-account-issuer ":6443" contained a ':' but was not a valid URL`},
	} {
		dataDir := filepath.Join(t.TempDir(), "data")
		_, err := Start(context.Background(), Options{DataDir: dataDir, BindAddress: "127.0.0.1", ServiceAccountIssuers: tc.issuers})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: Start error %v, want %q", tc.issuers, err, tc.want)
		}
		if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
			t.Errorf("%q: the data dir was created (%v)", tc.issuers, err)
		}
	}
}
