package sched

import (
	"reflect"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestClassKeyCoversTheRequest guards classKey against new JobSpec
// fields: every field must be part of the class (changing it changes the
// key), leave the job without a class, or be listed as read neither by
// the request nor by the gates that the tail shortcut skips. A new field
// fails here until it is sorted into one of the three.
func TestClassKeyCoversTheRequest(t *testing.T) {
	notRead := map[string]bool{
		"Name": true, "Account": true, "QOS": true, "Comment": true, "Script": true, "ScriptArgs": true,
		"WorkDir": true, "SubmitDir": true, "SubmitHost": true, "Environment": true,
		// Checked per job (the limit) or ordering only.
		"TimeLimit": true, "TimeMin": true, "Nice": true, "Priority": true,
		"Stdout": true, "Stderr": true, "Stdin": true, "OpenMode": true, "Requeue": true, "Signal": true,
		"Dependency": true, "KillInvalidDep": true, "Array": true, "MailType": true, "MailUser": true,
		"Allocation": true, "ContainerImage": true, "ContainerMounts": true,
		// Read only with --switches, which has no class.
		"SwitchWait": true,
	}
	noClass := map[string]bool{"NodeList": true, "Exclude": true, "Switches": true, "BeginTime": true, "Hold": true}
	base := &api.Job{ID: 1, JobSpec: api.JobSpec{Partition: "gpu", GPUs: 1, TimeLimit: 600}}
	k0, ok := classOf(base)
	if !ok {
		t.Fatal("a plain job has no class")
	}
	st := reflect.TypeOf(api.JobSpec{})
	for i := range st.NumField() {
		f := st.Field(i)
		j := *base
		v := reflect.ValueOf(&j.JobSpec).Elem().Field(i)
		switch v.Kind() {
		case reflect.String:
			v.SetString("other")
		case reflect.Int, reflect.Int64:
			v.SetInt(v.Int() + 7)
		case reflect.Uint32:
			v.SetUint(v.Uint() + 7)
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Slice:
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			if v.Type().Elem().Kind() == reflect.String {
				v.Index(0).SetString("n1")
			}
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem()))
		case reflect.Struct:
			if f.Type != reflect.TypeOf(time.Time{}) {
				t.Fatalf("field %s: unhandled type %s", f.Name, f.Type)
			}
			v.Set(reflect.ValueOf(time.Unix(1000, 0)))
		default:
			t.Fatalf("field %s: unhandled kind %s", f.Name, v.Kind())
		}
		k, ok := classOf(&j)
		switch {
		case noClass[f.Name]:
			if ok {
				t.Errorf("a job with %s set has a class", f.Name)
			}
		case notRead[f.Name]:
			if !ok || k != k0 {
				t.Errorf("%s changes the class (ok=%v): it is listed as not read by the request", f.Name, ok)
			}
		default:
			if ok && k == k0 {
				t.Errorf("JobSpec.%s is not part of classKey: jobs differing in it would share a request", f.Name)
			}
		}
	}
	for name, j := range map[string]api.Job{
		"held":           {JobSpec: base.JobSpec, HoldKind: api.HoldUser},
		"two partitions": {JobSpec: base.JobSpec, PartitionList: "gpu,cpu"},
	} {
		if _, ok := classOf(&j); ok {
			t.Errorf("a %s job has a class", name)
		}
	}
	if k, ok := classOf(&api.Job{JobSpec: base.JobSpec, PartitionList: "cpu"}); !ok || k == k0 {
		t.Errorf("the partition list does not decide the class's partition")
	}
}
