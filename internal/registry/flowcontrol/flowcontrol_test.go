package flowcontrol

import (
	"reflect"
	"strings"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// TestInitialConfiguration: every object the server creates at start passes the write
// path unchanged by defaulting (else the mandatory ones could never be re-created equal),
// and every schema refers to a level that exists.
func TestInitialConfiguration(t *testing.T) {
	fsr, plr := findResource(t, "flowschemas"), findResource(t, "prioritylevelconfigurations")
	levels := map[string]bool{}
	var schemas []*flowcontrolv1.FlowSchema
	for _, obj := range InitialConfiguration() {
		switch o := obj.(type) {
		case *flowcontrolv1.PriorityLevelConfiguration:
			levels[o.Name] = true
			defaulted := o.DeepCopy()
			plr.Strategy.Default(defaulted)
			if !reflect.DeepEqual(defaulted, o) {
				t.Errorf("defaulting changes %s: %+v", o.Name, defaulted.Spec)
			}
			assertErrs(t, plr.Strategy.Validate(ctx, o), nil)
		case *flowcontrolv1.FlowSchema:
			schemas = append(schemas, o)
			defaulted := o.DeepCopy()
			fsr.Strategy.Default(defaulted)
			if !reflect.DeepEqual(defaulted, o) {
				t.Errorf("defaulting changes %s", o.Name)
			}
			assertErrs(t, fsr.Strategy.Validate(ctx, o), nil)
		}
	}
	for _, fs := range schemas {
		if !levels[fs.Spec.PriorityLevelConfiguration.Name] {
			t.Errorf("%s refers to missing level %q", fs.Name, fs.Spec.PriorityLevelConfiguration.Name)
		}
	}
	for _, name := range []string{"exempt", "catch-all", "global-default", "workload-low"} {
		if !levels[name] {
			t.Errorf("no priority level %q", name)
		}
	}
}

// validSchema is the schema upstream's conformance spec creates.
func validSchema() *flowcontrolv1.FlowSchema {
	return &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-example-fs-abcde"},
		Spec: flowcontrolv1.FlowSchemaSpec{
			MatchingPrecedence:         10000,
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "global-default"},
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects:         users("example-e2e-non-existent-user"),
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
			}},
		},
	}
}

func TestFlowSchemaValidate(t *testing.T) {
	r := findResource(t, "flowschemas")
	if !r.HasStatus || r.Namespaced {
		t.Errorf("identity = %+v", r)
	}
	tests := []struct {
		name    string
		change  func(*flowcontrolv1.FlowSchema)
		want    []fieldErr
		message string
	}{
		{"valid", func(*flowcontrolv1.FlowSchema) {}, nil, ""},
		{"precedence defaulted", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.MatchingPrecedence = 0 }, nil, ""},
		{"precedence too large", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.MatchingPrecedence = 10001 },
			[]fieldErr{{field.ErrorTypeInvalid, "spec.matchingPrecedence"}}, "must not be greater than 10000"},
		{"precedence 1 is exempt's", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.MatchingPrecedence = 1 },
			[]fieldErr{{field.ErrorTypeInvalid, "spec.matchingPrecedence"}}, "only the schema named 'exempt'"},
		{"no level", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.PriorityLevelConfiguration.Name = "" },
			[]fieldErr{{field.ErrorTypeRequired, "spec.priorityLevelConfiguration.name"}}, "must reference a priority level"},
		{"bad distinguisher", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.DistinguisherMethod.Type = "ByPod" },
			[]fieldErr{{field.ErrorTypeNotSupported, "spec.distinguisherMethod.type"}}, ""},
		{"no subjects", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.Rules[0].Subjects = nil },
			[]fieldErr{{field.ErrorTypeRequired, "spec.rules[0].subjects"}}, "at least one value"},
		{"no rules", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.Rules[0].NonResourceRules = nil },
			[]fieldErr{{field.ErrorTypeRequired, "spec.rules[0]"}}, "at least one of resourceRules and nonResourceRules"},
		{"user subject with a group", func(fs *flowcontrolv1.FlowSchema) {
			fs.Spec.Rules[0].Subjects[0].Group = &flowcontrolv1.GroupSubject{Name: "g"}
		}, []fieldErr{{field.ErrorTypeForbidden, "spec.rules[0].subjects[0].group"}}, ""},
		{"service account without namespace", func(fs *flowcontrolv1.FlowSchema) {
			fs.Spec.Rules[0].Subjects = []flowcontrolv1.Subject{serviceAccount("", "*")}
		}, []fieldErr{{field.ErrorTypeRequired, "spec.rules[0].subjects[0].serviceAccount.namespace"}}, ""},
		{"unknown verb", func(fs *flowcontrolv1.FlowSchema) {
			fs.Spec.Rules[0].NonResourceRules[0].Verbs = []string{"get", "fly"}
		},
			[]fieldErr{{field.ErrorTypeNotSupported, "spec.rules[0].nonResourceRules[0].verbs"}}, ""},
		{"wildcard in the middle of a URL", func(fs *flowcontrolv1.FlowSchema) {
			fs.Spec.Rules[0].NonResourceRules[0].NonResourceURLs = []string{"/apis/*/foo"}
		}, []fieldErr{{field.ErrorTypeInvalid, "spec.rules[0].nonResourceRules[0].nonResourceURLs[0]"}}, "suffix matching"},
		{"namespaced rule without namespaces", func(fs *flowcontrolv1.FlowSchema) {
			fs.Spec.Rules[0].ResourceRules = []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}
		}, []fieldErr{{field.ErrorTypeRequired, "spec.rules[0].resourceRules[0].namespaces"}}, ""},
		{"mandatory spec changed", func(fs *flowcontrolv1.FlowSchema) {
			*fs = *MandatoryFlowSchema("catch-all")
			fs.Spec.MatchingPrecedence = 9000
		}, []fieldErr{{field.ErrorTypeInvalid, "spec"}}, "spec of 'catch-all' must equal the fixed value"},
		{"duplicate condition", func(fs *flowcontrolv1.FlowSchema) {
			fs.Status.Conditions = []flowcontrolv1.FlowSchemaCondition{{Type: "Dangling"}, {Type: "Dangling"}}
		}, []fieldErr{{field.ErrorTypeDuplicate, "status.conditions[1].type"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := validSchema()
			tt.change(fs)
			r.Strategy.Default(fs)
			errs := r.Strategy.Validate(ctx, fs)
			assertErrs(t, errs, tt.want)
			if tt.message != "" && len(errs) > 0 && !strings.Contains(errs[0].Detail, tt.message) {
				t.Errorf("detail = %q, want it to contain %q", errs[0].Detail, tt.message)
			}
			assertErrs(t, r.Strategy.ValidateUpdate(ctx, fs, validSchema()), tt.want)
		})
	}
	fs := validSchema()
	fs.Spec.MatchingPrecedence = 0
	r.Strategy.Default(fs)
	if fs.Spec.MatchingPrecedence != 1000 {
		t.Errorf("defaulted precedence = %d, want 1000", fs.Spec.MatchingPrecedence)
	}
}

// validLevel is the level upstream's conformance spec creates.
func validLevel() *flowcontrolv1.PriorityLevelConfiguration {
	return &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-example-pl-abcde"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: ptr.To[int32](2),
				LimitResponse:            flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject},
			},
		},
	}
}

func TestPriorityLevelValidate(t *testing.T) {
	r := findResource(t, "prioritylevelconfigurations")
	queue := func(pl *flowcontrolv1.PriorityLevelConfiguration, q flowcontrolv1.QueuingConfiguration) {
		pl.Spec.Limited.LimitResponse = flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue, Queuing: &q}
	}
	tests := []struct {
		name    string
		change  func(*flowcontrolv1.PriorityLevelConfiguration)
		want    []fieldErr
		message string
	}{
		{"valid", func(*flowcontrolv1.PriorityLevelConfiguration) {}, nil, ""},
		{"zero shares", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec.Limited.NominalConcurrencyShares = ptr.To[int32](0)
		}, nil, ""},
		{"queuing defaulted", func(pl *flowcontrolv1.PriorityLevelConfiguration) { queue(pl, flowcontrolv1.QueuingConfiguration{}) }, nil, ""},
		{"negative shares", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec.Limited.NominalConcurrencyShares = ptr.To[int32](-1)
		},
			[]fieldErr{{field.ErrorTypeInvalid, "spec.limited.nominalConcurrencyShares"}}, "non-negative"},
		{"lendable over 100", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec.Limited.LendablePercent = ptr.To[int32](101)
		},
			[]fieldErr{{field.ErrorTypeInvalid, "spec.limited.lendablePercent"}}, "between 0 and 100"},
		{"exempt type on another name", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec = flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementExempt}
		}, []fieldErr{{field.ErrorTypeInvalid, "spec.type"}}, "type must be 'Exempt' if and only if name is 'exempt'"},
		{"limited missing", func(pl *flowcontrolv1.PriorityLevelConfiguration) { pl.Spec.Limited = nil },
			[]fieldErr{{field.ErrorTypeRequired, "spec.limited"}}, ""},
		{"unknown type", func(pl *flowcontrolv1.PriorityLevelConfiguration) { pl.Spec.Type = "Unlimited" },
			[]fieldErr{{field.ErrorTypeNotSupported, "spec.type"}}, ""},
		{"queuing on reject", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec.Limited.LimitResponse.Queuing = &flowcontrolv1.QueuingConfiguration{Queues: 1, HandSize: 1, QueueLengthLimit: 1}
		}, []fieldErr{{field.ErrorTypeForbidden, "spec.limited.limitResponse.queuing"}}, ""},
		{"queue without queuing", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec.Limited.LimitResponse.Type = flowcontrolv1.LimitResponseTypeQueue
		}, []fieldErr{{field.ErrorTypeRequired, "spec.limited.limitResponse.queuing"}}, ""},
		{"hand larger than deck", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			queue(pl, flowcontrolv1.QueuingConfiguration{Queues: 4, HandSize: 5, QueueLengthLimit: 10})
		}, []fieldErr{{field.ErrorTypeInvalid, "spec.limited.limitResponse.queuing.handSize"}}, "should not be greater than queues (4)"},
		{"too much entropy", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			queue(pl, flowcontrolv1.QueuingConfiguration{Queues: 1 << 20, HandSize: 4 << 10, QueueLengthLimit: 10})
		}, []fieldErr{{field.ErrorTypeInvalid, "spec.limited.limitResponse.queuing.handSize"}}, "required entropy bits"},
		{"mandatory spec changed", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			*pl = *MandatoryPriorityLevel("catch-all")
			pl.Spec.Limited.NominalConcurrencyShares = ptr.To[int32](50)
		}, []fieldErr{{field.ErrorTypeInvalid, "spec"}}, "must equal the fixed value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := validLevel()
			tt.change(pl)
			r.Strategy.Default(pl)
			errs := r.Strategy.Validate(ctx, pl)
			assertErrs(t, errs, tt.want)
			if tt.message != "" && len(errs) > 0 && !strings.Contains(errs[0].Detail, tt.message) {
				t.Errorf("detail = %q, want it to contain %q", errs[0].Detail, tt.message)
			}
		})
	}
	pl := validLevel()
	pl.Spec.Limited.NominalConcurrencyShares = nil
	queue(pl, flowcontrolv1.QueuingConfiguration{})
	r.Strategy.Default(pl)
	want := flowcontrolv1.QueuingConfiguration{Queues: 64, HandSize: 8, QueueLengthLimit: 50}
	if *pl.Spec.Limited.NominalConcurrencyShares != 30 || *pl.Spec.Limited.LendablePercent != 0 || *pl.Spec.Limited.LimitResponse.Queuing != want {
		t.Errorf("defaulted = %+v", pl.Spec.Limited)
	}
}

func TestFlowControlPrint(t *testing.T) {
	fsr, plr := findResource(t, "flowschemas"), findResource(t, "prioritylevelconfigurations")
	assertColumns(t, fsr, "Name", "PriorityLevel", "MatchingPrecedence", "DistinguisherMethod", "Age", "MissingPL")
	fs := validSchema()
	fs.CreationTimestamp = threeDaysAgo
	if got, want := fsr.Printer.Row(fs), []interface{}{fs.Name, "global-default", int64(10000), "ByUser", "3d", "?"}; !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
	fs.Spec.DistinguisherMethod = nil
	fs.Status.Conditions = []flowcontrolv1.FlowSchemaCondition{{Type: flowcontrolv1.FlowSchemaConditionDangling, Status: flowcontrolv1.ConditionFalse}}
	if got := fsr.Printer.Row(fs); got[3] != "<none>" || got[5] != "False" {
		t.Errorf("row = %#v", got)
	}

	assertColumns(t, plr, "Name", "Type", "NominalConcurrencyShares", "Queues", "HandSize", "QueueLengthLimit", "Age")
	pl := MandatoryPriorityLevel("exempt")
	pl.CreationTimestamp = threeDaysAgo
	if got, want := plr.Printer.Row(pl), []interface{}{"exempt", "Exempt", "<none>", "<none>", "<none>", "<none>", "3d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
	for _, l := range suggestedPriorityLevels() {
		if l.Name == "workload-low" {
			l.CreationTimestamp = threeDaysAgo
			if got, want := plr.Printer.Row(l), []interface{}{"workload-low", "Limited", int64(100), int64(128), int64(6), int64(50), "3d"}; !reflect.DeepEqual(got, want) {
				t.Errorf("row = %#v, want %#v", got, want)
			}
		}
	}
}
