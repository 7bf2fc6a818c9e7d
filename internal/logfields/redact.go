package logfields

import (
	"strings"

	"github.com/sirupsen/logrus"
)

// Redacting wraps a formatter so that no Secret's content reaches the log. Wrangler's apply,
// at debug level, logs each object it patches in full: the patch, the object as last applied,
// as desired and as found. For a Secret that is its data: a registration token, an agent's
// credential, a git password. Such a line keeps what it says (which Secret, patched or
// updated, for which set) and loses everything after its " -- ".
func Redacting(f logrus.Formatter) logrus.Formatter { return redacting{f} }

type redacting struct{ logrus.Formatter }

func (r redacting) Format(e *logrus.Entry) ([]byte, error) {
	e.Message = redact(e.Message)
	return r.Formatter.Format(e)
}

// The prefix of wrangler apply's lines, and how they name a Secret's kind (a
// schema.GroupVersionKind printed).
const (
	desiredSet = "DesiredSet - "
	secretKind = "/v1, Kind=Secret "
	contentSep = " -- "
)

// Redacted ends a line whose content was cut.
const Redacted = " -- [the Secret's content is not logged]"

func redact(msg string) string {
	if !strings.HasPrefix(msg, desiredSet) || !strings.Contains(msg, secretKind) {
		return msg
	}
	if i := strings.Index(msg, contentSep); i >= 0 {
		return msg[:i] + Redacted
	}
	return msg
}
