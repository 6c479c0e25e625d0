package batch

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"
	_ "time/tzdata" // timeZone validation must not depend on the host's zoneinfo

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	batchv1beta1 "k8s.io/api/batch/v1beta1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
	"mizzen/internal/registry/core"
)

// maxCronJobNameLength leaves room for the 11-character suffix the cronjob controller
// appends to job names, which are 63 characters at most.
const maxCronJobNameLength = 63 - 11

// validTimeZoneCharacters is what each /-separated part of an IANA zone name may hold.
var validTimeZoneCharacters = regexp.MustCompile(`^[A-Za-z\.\-_0-9+]{1,14}$`)

// CronJobs describes batch/v1 cronjobs.
func CronJobs() *registry.Resource {
	return &registry.Resource{
		GroupVersion:    batchv1.SchemeGroupVersion,
		Resource:        "cronjobs",
		Kind:            "CronJob",
		SingularName:    "cronjob",
		Namespaced:      true,
		ShortNames:      []string{"cj"},
		Categories:      []string{"all"},
		ValidateName:    apivalidation.NameIsDNSSubdomain,
		New:             func() runtime.Object { return &batchv1.CronJob{} },
		NewList:         func() runtime.Object { return &batchv1.CronJobList{} },
		Strategy:        cronJobStrategy{},
		Printer:         cronJobPrinter(),
		HasStatus:       true,
		StatusKeepsMeta: registry.MetaAll,
	}
}

type cronJobStrategy struct{ registry.BaseStrategy }

// Default applies upstream's batch/v1 cronjob defaults and the pod template's. The job
// template gets no job defaults: those come when the controller creates each job.
func (cronJobStrategy) Default(obj runtime.Object) {
	cj := obj.(*batchv1.CronJob)
	if cj.Spec.ConcurrencyPolicy == "" {
		cj.Spec.ConcurrencyPolicy = batchv1.AllowConcurrent
	}
	if cj.Spec.Suspend == nil {
		cj.Spec.Suspend = ptr(false)
	}
	if cj.Spec.SuccessfulJobsHistoryLimit == nil {
		cj.Spec.SuccessfulJobsHistoryLimit = ptr(int32(3))
	}
	if cj.Spec.FailedJobsHistoryLimit == nil {
		cj.Spec.FailedJobsHistoryLimit = ptr(int32(1))
	}
	core.DefaultPodSpec(&cj.Spec.JobTemplate.Spec.Template.Spec)
}

func (cronJobStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	cj := obj.(*batchv1.CronJob)
	cj.Status = batchv1.CronJobStatus{}
	cj.Spec.JobTemplate.Spec.Scheduling = nil // alpha WorkloadWithJob, off: dropped as for jobs
}

func (cronJobStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	if old.(*batchv1.CronJob).Spec.JobTemplate.Spec.Scheduling == nil {
		obj.(*batchv1.CronJob).Spec.JobTemplate.Spec.Scheduling = nil
	}
}

func (cronJobStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	cj := obj.(*batchv1.CronJob)
	var allErrs field.ErrorList
	if len(cj.Name) > maxCronJobNameLength {
		allErrs = append(allErrs, field.Invalid(field.NewPath("metadata", "name"), cj.Name,
			fmt.Sprintf("must be no more than %d characters", maxCronJobNameLength)))
	}
	return append(allErrs, validateCronJobSpec(&cj.Spec, false, field.NewPath("spec"))...)
}

// ValidateUpdate skips the name length rule, so that old long-named cronjobs can still
// be changed and deleted, and keeps accepting a TZ= schedule the object already had.
func (cronJobStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	cj, oldCJ := obj.(*batchv1.CronJob), old.(*batchv1.CronJob)
	return validateCronJobSpec(&cj.Spec, strings.Contains(oldCJ.Spec.Schedule, "TZ"), field.NewPath("spec"))
}

func validateCronJobSpec(spec *batchv1.CronJobSpec, allowTZInSchedule bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if spec.Schedule == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("schedule"), ""))
	} else {
		allErrs = append(allErrs, validateSchedule(spec.Schedule, allowTZInSchedule, spec.TimeZone, fldPath.Child("schedule"))...)
	}
	if spec.StartingDeadlineSeconds != nil {
		allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(*spec.StartingDeadlineSeconds, fldPath.Child("startingDeadlineSeconds"))...)
	}
	switch spec.ConcurrencyPolicy {
	case batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent:
	case "":
		allErrs = append(allErrs, field.Required(fldPath.Child("concurrencyPolicy"), ""))
	default:
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("concurrencyPolicy"), spec.ConcurrencyPolicy,
			[]batchv1.ConcurrencyPolicy{batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent}))
	}

	jt := fldPath.Child("jobTemplate", "spec")
	allErrs = append(allErrs, validateJobTemplateSpecCommon(&spec.JobTemplate.Spec, jt)...)
	// The controller generates each job's selector.
	if spec.JobTemplate.Spec.Selector != nil {
		allErrs = append(allErrs, field.Invalid(jt.Child("selector"), spec.JobTemplate.Spec.Selector, "`selector` will be auto-generated"))
	}
	if ms := spec.JobTemplate.Spec.ManualSelector; ms != nil && *ms {
		allErrs = append(allErrs, field.NotSupported(jt.Child("manualSelector"), *ms, []string{"nil", "false"}))
	}

	if spec.SuccessfulJobsHistoryLimit != nil {
		allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(*spec.SuccessfulJobsHistoryLimit), fldPath.Child("successfulJobsHistoryLimit"))...)
	}
	if spec.FailedJobsHistoryLimit != nil {
		allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(*spec.FailedJobsHistoryLimit), fldPath.Child("failedJobsHistoryLimit"))...)
	}
	return append(allErrs, validateTimeZone(spec.TimeZone, fldPath.Child("timeZone"))...)
}

// validateSchedule checks a standard cron schedule (5 fields, or @hourly and the like).
// A TZ= or CRON_TZ= prefix is only tolerated on objects that already had one.
func validateSchedule(schedule string, allowTZ bool, timeZone *string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if _, err := cron.ParseStandard(schedule); err != nil {
		allErrs = append(allErrs, field.Invalid(fldPath, schedule, err.Error()))
	}
	switch {
	case allowTZ && strings.Contains(schedule, "TZ") && timeZone != nil:
		allErrs = append(allErrs, field.Invalid(fldPath, schedule, "cannot use both timeZone field and TZ or CRON_TZ in schedule"))
	case !allowTZ && strings.Contains(schedule, "TZ"):
		allErrs = append(allErrs, field.Invalid(fldPath, schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
	}
	return allErrs
}

// validateTimeZone checks spec.timeZone names an IANA time zone.
func validateTimeZone(tz *string, fldPath *field.Path) field.ErrorList {
	if tz == nil {
		return nil
	}
	if *tz == "" {
		return field.ErrorList{field.Invalid(fldPath, *tz, "timeZone must be nil or non-empty string")}
	}
	for _, part := range strings.Split(*tz, "/") {
		if part == "." || part == ".." || strings.HasPrefix(part, "-") || !validTimeZoneCharacters.MatchString(part) {
			return field.ErrorList{field.Invalid(fldPath, *tz, fmt.Sprintf("unknown time zone %s", *tz))}
		}
	}
	if strings.EqualFold(*tz, "Local") {
		return field.ErrorList{field.Invalid(fldPath, *tz, "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones")}
	}
	if _, err := time.LoadLocation(*tz); err != nil {
		return field.ErrorList{field.Invalid(fldPath, *tz, err.Error())}
	}
	return nil
}

func cronJobPrinter() *registry.Printer {
	spec, status := batchv1beta1.CronJobSpec{}.SwaggerDoc(), batchv1beta1.CronJobStatus{}.SwaggerDoc()
	return &registry.Printer{
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Schedule", Type: "string", Description: spec["schedule"]},
			{Name: "Timezone", Type: "string", Description: spec["timeZone"]},
			{Name: "Suspend", Type: "boolean", Description: spec["suspend"]},
			{Name: "Active", Type: "integer", Description: status["active"]},
			{Name: "Last Schedule", Type: "string", Description: status["lastScheduleTime"]},
			registry.AgeColumn,
			containersColumn,
			imagesColumn,
			{Name: "Selector", Type: "string", Priority: 1, Description: batchv1.JobSpec{}.SwaggerDoc()["selector"]},
		},
		Row: func(obj runtime.Object) []interface{} {
			cj := obj.(*batchv1.CronJob)
			lastSchedule := "<none>"
			if cj.Status.LastScheduleTime != nil {
				lastSchedule = registry.Age(*cj.Status.LastScheduleTime)
			}
			timeZone := "<none>"
			if cj.Spec.TimeZone != nil {
				timeZone = *cj.Spec.TimeZone
			}
			suspend := "<unset>"
			if cj.Spec.Suspend != nil {
				suspend = "False"
				if *cj.Spec.Suspend {
					suspend = "True"
				}
			}
			names, images := containerCells(cj.Spec.JobTemplate.Spec.Template.Spec.Containers)
			return []interface{}{cj.Name, cj.Spec.Schedule, timeZone, suspend, int64(len(cj.Status.Active)), lastSchedule,
				registry.Age(cj.CreationTimestamp), names, images, metav1.FormatLabelSelector(cj.Spec.JobTemplate.Spec.Selector)}
		},
	}
}
