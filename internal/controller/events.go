package controller

import (
	"fmt"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// eventer records events (events.k8s.io/v1) about real changes only: an
// event is an API write, and an idle system writes nothing.
type eventer struct{ rec events.EventRecorder }

// noteLimit is the longest note the API server accepts (events.k8s.io/v1
// validation): a longer event is refused and silently lost. The first
// provisioning of a tenant lists a dozen changes and exceeds it.
const noteLimit = 1024

// note formats an event's note, cut to noteLimit bytes on a rune boundary.
func note(format string, args ...any) string {
	s := fmt.Sprintf(format, args...)
	if len(s) <= noteLimit {
		return s
	}
	const more = " …"
	cut := noteLimit - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}

// normal records a change the operator made. action is what it did
// ("Provision", "Apply", "Rotate", ...), reason the machine-readable why.
func (e eventer) normal(obj runtime.Object, reason, action, format string, args ...any) {
	if e.rec != nil {
		e.rec.Eventf(obj, nil, corev1.EventTypeNormal, reason, action, "%s", note(format, args...))
	}
}

// warning records a problem a human should look at.
func (e eventer) warning(obj runtime.Object, reason, action, format string, args ...any) {
	if e.rec != nil {
		e.rec.Eventf(obj, nil, corev1.EventTypeWarning, reason, action, "%s", note(format, args...))
	}
}

// changed records a change to one owned object. The object is the event's
// "related" object and part of its reason (e.g. SecretCreated): events of
// the new API that share regarding, related, reason and action are merged
// into one series, which client-go rewrites minutes later — an API write on
// an idle system. Distinct events are written once.
func (e eventer) changed(obj runtime.Object, related runtime.Object, kind, outcome, format string, args ...any) {
	if e.rec != nil {
		e.rec.Eventf(obj, related, corev1.EventTypeNormal, kind+outcome, "Apply", "%s", note(format, args...))
	}
}
