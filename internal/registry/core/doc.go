// Package core describes the core/v1 ("legacy", group "") resources for the apiserver:
// their identity, upstream's v1 defaulting, the validation rules clients hit most,
// field selectors and the server-side printing columns kubectl shows.
//
// DefaultPodSpec and ValidatePodTemplateSpec are exported for the registries of
// resources that embed pod templates (apps, batch).
package core
