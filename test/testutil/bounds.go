package testutil

import "time"

// CommandBound is how long a test gives one sriov-lane command, or a
// kubevirtci script running one, before it kills it. A warm up takes one
// to two minutes; under make test's full load on a machine new to it, with
// six lanes, the kernel tier and a dozen API servers starting on two cores,
// create cluster alone took 1m41s to 3m19s and up passed five minutes. The
// bound only says when to give up, so it is generous.
const CommandBound = 10 * time.Minute

// APIServerReadyBound is how long a test's control plane gets to answer
// /readyz. kube-apiserver answers in 10-20 s on an idle machine; under the
// same load three of them took over 90 s.
const APIServerReadyBound = 4 * time.Minute
