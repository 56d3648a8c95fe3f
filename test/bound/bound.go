package bound

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// ScaleEnv names the factor every bound a test waits on is multiplied by.
// make test sets it from the machine's cores and load (hack/test-tiers.sh);
// unset, it is 1: the bounds as written, for a quiet machine of 4 cores.
// Product bounds never scale: a test that needs a product bound longer on
// a slow machine has found a product bug.
const ScaleEnv = "SRIOV_LANE_TEST_SCALE"

// Scale is the factor in ScaleEnv. A value that is not a number of at
// least 1 panics: a typo there would otherwise shorten or silently drop
// every bound.
func Scale() float64 {
	v := os.Getenv(ScaleEnv)
	if v == "" {
		return 1
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 1 {
		panic(fmt.Sprintf("%s=%q: want a number of at least 1", ScaleEnv, v))
	}
	return f
}

// Scaled is d times Scale(): the bound of a test's wait on this machine.
func Scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * Scale())
}
