package wire

import "time"

// ConfigPath is where the host puts the guest's Config in the initramfs.
const ConfigPath = "/guest.json"

// OutDir is the directory whose files the guest sends back
// ($SRIOV_LANE_GUEST_OUT).
const OutDir = "/out"

// ResultPort is the serial port the guest writes its records to; the
// kernel console is on ttyS0.
const ResultPort = "/dev/ttyS1"

// Config is what guest-init runs, written by the host.
type Config struct {
	Modules  []string  `json:"modules"` // guest paths of .ko files, in load order
	Programs []Program `json:"programs"`
}

// Program is one program guest-init runs, in order.
type Program struct {
	Name string   `json:"name"`
	Path string   `json:"path"` // guest path
	Args []string `json:"args,omitempty"`
	Env  []string `json:"env,omitempty"`
}

// Record kinds, one JSON object a line on ResultPort.
const (
	KindModule = "module" // a module loaded (or not: Error)
	KindRun    = "run"    // a program ended
	KindFile   = "file"   // a file the programs left in OutDir
	KindError  = "error"  // guest-init itself failed (Error); the end follows
	KindEnd    = "end"    // the last record: without it the guest died
)

// Record is one line of the result stream. The serial port under TCG
// carries ~100 KB/s (measured: a 2 MiB file took ~30 s), so file contents
// go compressed.
type Record struct {
	Kind     string        `json:"kind"`
	Name     string        `json:"name,omitempty"` // module file, program name, or file path relative to OutDir
	Exit     int           `json:"exit,omitempty"`
	Output   string        `json:"output,omitempty"`
	Duration time.Duration `json:"duration,omitempty"`
	Error    string        `json:"error,omitempty"`
	Data     []byte        `json:"data,omitempty"` // base64 in JSON; gzip-compressed when Gzip
	Gzip     bool          `json:"gzip,omitempty"`
}
