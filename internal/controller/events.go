package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// eventer records events (events.k8s.io/v1) about real changes only: an
// event is an API write, and an idle system writes nothing.
type eventer struct{ rec events.EventRecorder }

// normal records a change the operator made. action is what it did
// ("Provision", "Apply", "Rotate", ...), reason the machine-readable why.
func (e eventer) normal(obj runtime.Object, reason, action, format string, args ...any) {
	if e.rec != nil {
		e.rec.Eventf(obj, nil, corev1.EventTypeNormal, reason, action, format, args...)
	}
}

// warning records a problem a human should look at.
func (e eventer) warning(obj runtime.Object, reason, action, format string, args ...any) {
	if e.rec != nil {
		e.rec.Eventf(obj, nil, corev1.EventTypeWarning, reason, action, format, args...)
	}
}
