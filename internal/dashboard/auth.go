package dashboard

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"strings"
	"time"
)

// The session lives in the browser: the user's bearer token in a cookie scripts cannot
// read (HttpOnly), sent only over HTTPS (Secure) and only with the dashboard's own
// requests (SameSite=Strict); beside it a random CSRF token that the pages' scripts read
// and echo in a header on every state-changing call (double submit).
const (
	tokenCookie = "mizzen-dashboard-token"
	csrfCookie  = "mizzen-dashboard-csrf"
	csrfHeader  = "X-CSRF-Token"
	// sessionLifetime bounds how long a browser keeps the cookies; the token's own
	// expiry, enforced by the apiserver, may end the session sooner.
	sessionLifetime = 12 * time.Hour
)

// tokenFrom is the bearer token of the request's session, or "".
func tokenFrom(r *http.Request) string {
	c, err := r.Cookie(tokenCookie)
	if err != nil {
		return ""
	}
	return c.Value
}

// csrfOK reports whether a state-changing request echoes its session's CSRF token.
func csrfOK(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil || c.Value == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(c.Value), []byte(r.Header.Get(csrfHeader))) == 1
}

var loginPage = template.Must(template.New("login").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>mizzen dashboard: log in</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/static/app.css"></head>
<body class="login"><form method="post" action="/login" id="login-form">
<h1>mizzen</h1>
<p>Log in with a bearer token: every request is made as its user, and RBAC decides what you may see and do.</p>
{{if .}}<p class="error" id="login-error">{{.}}</p>{{end}}
<label for="token">Token</label>
<textarea id="token" name="token" rows="6" autocomplete="off" spellcheck="false" required></textarea>
<button type="submit" id="login-button">Log in</button>
<p class="hint">A token for a ServiceAccount: <code>mizzen kubectl create token NAME -n NAMESPACE</code> (see docs/dashboard.md).</p>
</form></body></html>
`))

func (d *dashboard) serveLoginPage(w http.ResponseWriter, r *http.Request) {
	d.writeLogin(w, http.StatusOK, "")
}

func (d *dashboard) writeLogin(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = loginPage.Execute(w, msg)
}

// serveLogin checks the token with the apiserver (a SelfSubjectReview made with it)
// and, when the apiserver knows it, starts a session.
func (d *dashboard) serveLogin(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		d.log.Info("dashboard login from another origin refused", "origin", r.Header.Get("Origin"), "host", r.Host)
		d.writeLogin(w, http.StatusForbidden, "The login form must be sent from this dashboard.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	token := strings.TrimSpace(r.PostFormValue("token"))
	token = strings.TrimPrefix(token, "Bearer ")
	if token == "" || strings.ContainsAny(token, " \t\r\n;,\"\\") {
		d.writeLogin(w, http.StatusBadRequest, "A token is one line without spaces.")
		return
	}
	user, err := d.proxy.whoAmI(r.Context(), token)
	if err != nil {
		d.log.Info("dashboard login refused", "err", err)
		d.writeLogin(w, http.StatusUnauthorized, err.Error())
		return
	}
	d.log.Info("dashboard login", "user", user)
	csrf := make([]byte, 32)
	if _, err := rand.Read(csrf); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	setCookie(w, tokenCookie, token, true, sessionLifetime)
	setCookie(w, csrfCookie, hex.EncodeToString(csrf), false, sessionLifetime)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// serveLogout ends the session by expiring its cookies.
func (d *dashboard) serveLogout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) || !csrfOK(r) {
		http.Error(w, "cross-site request refused", http.StatusForbidden)
		return
	}
	setCookie(w, tokenCookie, "", true, -1)
	setCookie(w, csrfCookie, "", false, -1)
	w.WriteHeader(http.StatusNoContent)
}

func setCookie(w http.ResponseWriter, name, value string, httpOnly bool, maxAge time.Duration) {
	c := &http.Cookie{Name: name, Value: value, Path: "/", HttpOnly: httpOnly, Secure: true, SameSite: http.SameSiteStrictMode}
	if maxAge < 0 {
		c.MaxAge = -1
	} else {
		c.MaxAge = int(maxAge / time.Second)
	}
	http.SetCookie(w, c)
}

// whoAmI asks the apiserver who token belongs to. A token the apiserver does not
// authenticate is an error carrying its message; a user merely not allowed to ask
// (403) is still a user.
func (p *apiProxy) whoAmI(ctx context.Context, token string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	body := []byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.target.String()+"/apis/authentication.k8s.io/v1/selfsubjectreviews", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := p.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("the apiserver could not be reached: %v", err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var review struct {
		Message string `json:"message"`
		Status  struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	_ = json.Unmarshal(data, &review)
	switch {
	case resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusOK:
		return review.Status.UserInfo.Username, nil
	case resp.StatusCode == http.StatusForbidden:
		return "(unknown: not allowed to review itself)", nil
	case resp.StatusCode == http.StatusUnauthorized:
		msg := review.Message
		if msg == "" {
			msg = "Unauthorized"
		}
		return "", fmt.Errorf("the apiserver refused the token: %s", msg)
	default:
		return "", fmt.Errorf("the apiserver answered %s: %s", resp.Status, review.Message)
	}
}
