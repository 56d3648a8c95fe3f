package guest_test

import (
	"testing"

	"github.com/sriov-lane/sriov-lane/test/kernel/guest"
)

func TestMain(m *testing.M) { guest.Main(m) }
