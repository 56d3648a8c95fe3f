package provider

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/sriov-lane/sriov-lane/pkg/atomicfile"
	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// writeMachineIDs gives every node a fresh random machine-id file (32 lower
// hex digits and a newline, the format systemd and kubelet read).
func writeMachineIDs(l *config.Lane) error {
	if err := os.MkdirAll(l.Dir().MachineIDs(), 0o755); err != nil {
		return fmt.Errorf("creating machine-id directory: %w", err)
	}
	for _, n := range nodeNames(l) {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return fmt.Errorf("generating machine-id for %s: %w", n, err)
		}
		// Atomic like every file of the state dir: a crash never leaves a
		// node a truncated machine-id to mount.
		if err := atomicfile.Write(l.Dir().MachineID(n), []byte(hex.EncodeToString(b)+"\n"), 0o644); err != nil {
			return fmt.Errorf("writing machine-id for %s: %w", n, err)
		}
	}
	return nil
}
