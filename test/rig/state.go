package rig

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// File names inside a rig directory.
const (
	StateFile    = "rig.json"
	LaneFile     = "lane.yaml"
	LogFile      = "emulator.log"
	PIDFile      = "emulator.pid"
	sysDir       = "sys"
	devDir       = "dev"
	laneStateDir = "state"
)

// State is DIR/rig.json: everything Down needs to undo Up, written before
// the first host change so a failed Up can still be torn down.
type State struct {
	Prefix     string   `json:"prefix"`
	PeersNetns string   `json:"peersNetns"`
	SysfsRoot  string   `json:"sysfsRoot"`
	VFIODir    string   `json:"vfioDir"`
	PFs        []PFInfo `json:"pfs"`
	// ImageMirror goes into the rig's lane config (Options.ImageMirror).
	ImageMirror string `json:"imageMirror,omitempty"`
	// VFDriver picks the NIC the emulator stands in for (Options.VFDriver);
	// empty in a rig.json written before the option, meaning the default.
	VFDriver string `json:"vfDriver,omitempty"`
	// EmulatorPID is the detached `lane-rig emulate` process; 0 when the
	// emulator runs inside a test process.
	EmulatorPID int `json:"emulatorPid,omitempty"`
}

// PFInfo is one stand-in PF: its host link name, MAC and fake PCI address.
type PFInfo struct {
	Name string `json:"name"`
	MAC  string `json:"mac"`
	BDF  string `json:"bdf"`
}

// ReadState loads DIR/rig.json; a missing file returns (nil, nil).
func ReadState(dir string) (*State, error) {
	b, err := os.ReadFile(filepath.Join(dir, StateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading rig state: %w", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("decoding rig state %s: %w", filepath.Join(dir, StateFile), err)
	}
	return &s, nil
}

func writeState(dir string, s *State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, StateFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing rig state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, StateFile)); err != nil {
		return fmt.Errorf("writing rig state: %w", err)
	}
	return nil
}
