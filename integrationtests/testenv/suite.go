package testenv

import (
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
)

// RunSuite runs the ginkgo suite of t, with Eventually waiting up to timeout and polling every
// poll unless a spec says otherwise.
func RunSuite(t *testing.T, name string, timeout, poll time.Duration) {
	gomega.RegisterFailHandler(ginkgo.Fail)
	gomega.SetDefaultEventuallyTimeout(timeout)
	gomega.SetDefaultEventuallyPollingInterval(poll)
	ginkgo.RunSpecs(t, name)
}
