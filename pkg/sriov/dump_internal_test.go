package sriov

import (
	"errors"
	"fmt"
	"testing"

	"github.com/vishvananda/netlink"
)

// An interrupted dump's partial list is never what dump returns: a route
// list missing the uplink's default route would let a lane take the uplink.
func TestDumpRunsAnInterruptedDumpAgain(t *testing.T) {
	refused := errors.New("permission denied")
	for _, tc := range []struct {
		name        string
		interrupted int   // dumps interrupted before one that is whole
		last        error // what the whole dump returns
		wantCalls   int
		wantErr     error
		wantList    []int
	}{
		{"whole at once", 0, nil, 1, nil, []int{1, 2, 3}},
		{"interrupted twice", 2, nil, 3, nil, []int{1, 2, 3}},
		{"interrupted every time", 100, nil, 5, netlink.ErrDumpInterrupted, nil},
		{"refused", 0, refused, 1, refused, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			got, err := dump(func() ([]int, error) {
				calls++
				if calls <= tc.interrupted {
					return []int{1}, fmt.Errorf("dumping: %w", netlink.ErrDumpInterrupted)
				}
				if tc.last != nil {
					return nil, tc.last
				}
				return []int{1, 2, 3}, nil
			})
			if calls != tc.wantCalls || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) || fmt.Sprint(got) != fmt.Sprint(tc.wantList) {
				t.Errorf("dump: %v, %v after %d dumps; want %v, %v after %d", got, err, calls, tc.wantList, tc.wantErr, tc.wantCalls)
			}
		})
	}
}
