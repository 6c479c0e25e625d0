// Package bearer makes the GET requests tests send to a component's endpoint as a
// scraper would: with a bearer token, or none.
package bearer

import (
	"io"
	"net/http"
	"testing"
)

// Get fetches url with client, sending token as "Authorization: Bearer" unless it is
// empty, and returns the status code and body; a failed request fails the test.
func Get(t testing.TB, client *http.Client, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
