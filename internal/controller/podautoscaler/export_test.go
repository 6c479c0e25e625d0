package podautoscaler

import "k8s.io/client-go/tools/record"

// SetRecorder lets the external tests read the events the controller records.
func (c *Controller) SetRecorder(r record.EventRecorder) { c.recorder = r }
