package testutil

import (
	"time"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// CommandBound is how long a test gives one sriov-lane command, or a
// kubevirtci script running one, before it kills it. It is derived from
// the product's own wait (config.DefaultWaitTimeout, each of up's waits):
// a command whose wait runs out must still get to say why (its diagnosis,
// pkg/cni's diagnoseTimeout) and undo what it did before the harness kills
// it, or the test's failure says nothing. A warm up takes one to two
// minutes; under make test's old full load on a machine new to it, create
// cluster alone took 1m41s to 3m19s. The bound only says when to give up.
const CommandBound = config.DefaultWaitTimeout + 5*time.Minute

// APIServerReadyBound is how long a test's control plane gets to answer
// /readyz. kube-apiserver answers in 10-20 s on an idle machine; under the
// same load three of them took over 90 s.
const APIServerReadyBound = 4 * time.Minute
