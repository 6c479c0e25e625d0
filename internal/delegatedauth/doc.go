// Package delegatedauth authenticates and authorizes requests to servers other than
// the apiserver by asking the apiserver, as upstream's delegated authentication and
// authorization do for kube-scheduler, kube-controller-manager and aggregated servers:
// a client certificate is verified against the CAs the apiserver publishes in
// kube-system/extension-apiserver-authentication, a bearer token through a
// TokenReview, and a request through a SubjectAccessReview, each answer cached
// briefly. Filter puts both in front of a handler and answers 401 and 403 as
// upstream does.
package delegatedauth
