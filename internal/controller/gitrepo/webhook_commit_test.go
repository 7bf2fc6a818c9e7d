package gitrepo

import (
	"strings"
	"testing"
)

func TestRecordedCommit(t *testing.T) {
	sha := strings.Repeat("0123456789abcdef", 3)[:40]
	for _, tc := range []struct {
		commit string
		signed bool
		want   string
	}{
		{sha, true, sha},
		{sha, false, ""},                      // no secret: a reason to poll, nothing more
		{sha[:12], true, ""},                  // abbreviated
		{strings.ToUpper(sha[:40]), true, ""}, // not as git writes it
		{"refs/heads/main", true, ""},         // not a commit
		{sha + "0", true, ""},                 // too long
		{"../../" + sha[:34], true, ""},       // anything else
	} {
		if got := recordedCommit(tc.commit, tc.signed); got != tc.want {
			t.Errorf("recordedCommit(%q, %v) = %q, want %q", tc.commit, tc.signed, got, tc.want)
		}
	}
}
