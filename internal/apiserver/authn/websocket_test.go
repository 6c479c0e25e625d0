package authn

import (
	"encoding/base64"
	"net/http/httptest"
	"testing"
)

func TestWebSocketBearerToken(t *testing.T) {
	tokens := staticTokens{"good": {Name: "alice"}}
	proto := func(token string) string {
		return webSocketTokenProtocol + base64.RawURLEncoding.EncodeToString([]byte(token))
	}
	for _, tt := range []struct {
		name       string
		upgrade    bool
		protocols  string
		wantUser   string
		wantErr    bool
		wantHeader string // Sec-WebSocket-Protocol as it goes on
	}{
		{name: "a handshake with a good token", upgrade: true, protocols: "v5.channel.k8s.io, " + proto("good"), wantUser: "alice", wantHeader: "v5.channel.k8s.io"},
		{name: "a refused token", upgrade: true, protocols: proto("bad") + ", v5.channel.k8s.io", wantErr: true, wantHeader: proto("bad") + ", v5.channel.k8s.io"},
		{name: "not base64url", upgrade: true, protocols: webSocketTokenProtocol + "!!", wantErr: true, wantHeader: webSocketTokenProtocol + "!!"},
		{name: "no token subprotocol", upgrade: true, protocols: "v5.channel.k8s.io", wantHeader: "v5.channel.k8s.io"},
		{name: "not a WebSocket handshake", protocols: proto("good"), wantHeader: proto("good")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/api/v1/namespaces/default/pods/p/exec", nil)
			if tt.upgrade {
				r.Header.Set("Upgrade", "websocket")
				r.Header.Set("Connection", "Upgrade")
			}
			r.Header.Set("Sec-WebSocket-Protocol", tt.protocols)
			user, ok, err := WebSocketBearerToken(tokens).AuthenticateRequest(r)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			if got := map[bool]string{true: user.Name}[ok]; got != tt.wantUser {
				t.Errorf("user %q (ok %v), want %q", got, ok, tt.wantUser)
			}
			if got := r.Header.Get("Sec-WebSocket-Protocol"); got != tt.wantHeader {
				t.Errorf("Sec-WebSocket-Protocol goes on as %q, want %q", got, tt.wantHeader)
			}
		})
	}
}
