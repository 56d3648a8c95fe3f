package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// findSysfsRoot returns the mount point of the fake sysfs the rig
// bind-mounts into the node: a mount, other than /sys and what lies under
// it, whose directory holds bus/pci/devices. "" means none.
func findSysfsRoot(mountinfo string) (string, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", mountinfo, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		// Fields: id parent major:minor root mountpoint options ...
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if mp == "/sys" || strings.HasPrefix(mp, "/sys/") || mp == "/proc" || strings.HasPrefix(mp, "/proc/") {
			continue
		}
		if st, err := os.Stat(filepath.Join(mp, "bus", "pci", "devices")); err == nil && st.IsDir() {
			return mp, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("reading %s: %w", mountinfo, err)
	}
	return "", nil
}

// unescapeMountinfo undoes the kernel's octal escaping (\040 for space...).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
