package scenario

import (
	"testing"

	"golang.org/x/sys/unix"
)

// countRequests reads records as /dev/kmsg gives them: one a read, EPIPE
// for a record the ring overwrote (the next read goes on), EAGAIN at the
// end. Only the request line about the device asked for counts.
func TestCountRequests(t *testing.T) {
	const bdf = "0000:00:04.0"
	recs := []struct {
		rec string
		err error
	}{
		{"4,812,51234567,-;vfio-pci 0000:00:04.0: " + deviceRequestLine + "\n SUBSYSTEM=pci\n DEVICE=+pci:0000:00:04.0\n", nil},
		{"", unix.EPIPE},
		{"4,813,51234568,-;vfio-pci 0000:00:05.0: " + deviceRequestLine + "\n", nil},
		{"6,814,51234569,-;vfio-pci 0000:00:04.0: enabling device (0000 -> 0002)\n", nil},
		{"4,900,61234567,-;vfio-pci 0000:00:04.0: " + deviceRequestLine + "\n", nil},
	}
	read := func(buf []byte) (int, error) {
		if len(recs) == 0 {
			return 0, unix.EAGAIN
		}
		r := recs[0]
		recs = recs[1:]
		return copy(buf, r.rec), r.err
	}
	n, err := countRequests(read, bdf)
	if err != nil || n != 2 {
		t.Fatalf("countRequests = %d, %v; want 2 requests about %s, no error", n, err, bdf)
	}
	if _, err := countRequests(func([]byte) (int, error) { return 0, unix.EACCES }, bdf); err == nil {
		t.Fatal("a read refused (EACCES) was not an error")
	}
}
