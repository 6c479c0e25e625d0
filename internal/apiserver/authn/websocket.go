package authn

import (
	"encoding/base64"
	"net/http"
	"strings"

	"mizzen/internal/registry"
)

// webSocketTokenProtocol prefixes the subprotocol a browser's WebSocket carries a
// bearer token in, as upstream's apiserver reads it: a browser cannot set the
// Authorization header of a WebSocket handshake.
const webSocketTokenProtocol = "base64url.bearer.authorization.k8s.io."

// WebSocketBearerToken authenticates the token of a WebSocket handshake's
// "base64url.bearer.authorization.k8s.io.<base64url token>" subprotocol with tokens,
// and removes that subprotocol, so the token never travels on to a kubelet. A request
// that is not a WebSocket handshake or names no such subprotocol is not its kind.
func WebSocketBearerToken(tokens TokenAuthenticator) Authenticator { return webSocketToken{tokens} }

type webSocketToken struct{ tokens TokenAuthenticator }

func (a webSocketToken) AuthenticateRequest(r *http.Request) (registry.User, bool, error) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return registry.User{}, false, nil
	}
	var token string
	found := false
	var kept []string
	for _, header := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(header, ",") {
			p = strings.TrimSpace(p)
			if encoded, ok := strings.CutPrefix(p, webSocketTokenProtocol); ok && !found {
				data, err := base64.RawURLEncoding.DecodeString(encoded)
				if err != nil || len(data) == 0 {
					return registry.User{}, false, Unauthorized()
				}
				token, found = string(data), true
				continue
			}
			if p != "" {
				kept = append(kept, p)
			}
		}
	}
	if !found {
		return registry.User{}, false, nil
	}
	user, ok, err := a.tokens.AuthenticateToken(r.Context(), token)
	if ok {
		r.Header.Del("Sec-WebSocket-Protocol")
		if len(kept) > 0 {
			r.Header.Set("Sec-WebSocket-Protocol", strings.Join(kept, ", "))
		}
	}
	return user, ok, err
}
