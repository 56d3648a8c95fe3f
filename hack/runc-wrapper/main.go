// Command sriov-lane-runc is an OCI runtime shim for dockerd and Podman on
// hosts whose capability bounding set is smaller than the set the engines
// grant privileged containers (some VMs drop CAP_SYS_RESOURCE). Real runc
// refuses to apply a capability the caller cannot hold ("unable to apply
// caps"), which breaks `--privileged` containers and `docker exec` into
// them; without CAP_SYS_RESOURCE it cannot raise a resource limit either,
// and rootful Podman asks for RLIMIT_NOFILE and RLIMIT_NPROC far above a
// VM's ("error setting rlimit type 7: operation not permitted";
// containers/podman pkg/specgen/generate/oci.go addRlimits@v4.3.1). The
// shim trims every capability list in the OCI spec to what this process may
// hold and, lacking CAP_SYS_RESOURCE, every rlimit to this process's hard
// limit, then replaces itself with the real runc so the engine sees no
// difference.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// capNames maps capability bit numbers to their OCI names (linux/capability.h).
var capNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
	"CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK",
	"CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
	"CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE",
	"CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
	"CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
	"CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
}

func main() {
	real, err := findRealRunc()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sriov-lane-runc: %v\n", err)
		os.Exit(1)
	}
	if err := trimSpecs(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "sriov-lane-runc: %v\n", err)
		os.Exit(1)
	}
	argv := append([]string{real}, os.Args[1:]...)
	if err := syscall.Exec(real, argv, os.Environ()); err != nil {
		fmt.Fprintf(os.Stderr, "sriov-lane-runc: exec %s: %v\n", real, err)
		os.Exit(1)
	}
}

// trimSpecs rewrites the spec files named by --bundle (create/run) and
// --process (exec); other invocations (state, kill, delete...) pass through.
func trimSpecs(args []string) error {
	var bundle, process string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--bundle" && i+1 < len(args):
			bundle = args[i+1]
			i++
		case strings.HasPrefix(a, "--bundle="):
			bundle = strings.TrimPrefix(a, "--bundle=")
		case a == "--process" && i+1 < len(args):
			process = args[i+1]
			i++
		case strings.HasPrefix(a, "--process="):
			process = strings.TrimPrefix(a, "--process=")
		}
	}
	if bundle == "" && process == "" {
		return nil
	}
	allowed, err := boundingSet()
	if err != nil {
		return err
	}
	if bundle != "" {
		if err := rewrite(filepath.Join(bundle, "config.json"), allowed, true); err != nil {
			return err
		}
	}
	if process != "" {
		if err := rewrite(process, allowed, false); err != nil {
			return err
		}
	}
	return nil
}

// boundingSet returns the capability names in this process's bounding set.
func boundingSet() (map[string]bool, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return nil, fmt.Errorf("reading capability bounding set: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "CapBnd:") {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(line, "CapBnd:")), 16, 64)
		if err != nil {
			return nil, fmt.Errorf("parsing CapBnd %q: %w", line, err)
		}
		set := map[string]bool{}
		for bit, name := range capNames {
			if mask&(1<<uint(bit)) != 0 {
				set[name] = true
			}
		}
		return set, nil
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading /proc/self/status: %w", err)
	}
	return nil, fmt.Errorf("no CapBnd line in /proc/self/status")
}

// rewrite trims the capability lists and, in a container's config
// (nested: the process under "process"), the rlimits of an OCI spec or of
// a bare process spec (exec), preserving every other field as it is.
func rewrite(path string, allowed map[string]bool, nested bool) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading OCI spec %s: %w", path, err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("parsing OCI spec %s: %w", path, err)
	}
	proc := doc
	if nested {
		raw, ok := doc["process"]
		if !ok {
			return nil
		}
		if err := json.Unmarshal(raw, &proc); err != nil {
			return fmt.Errorf("parsing process of %s: %w", path, err)
		}
	}
	capsChanged, err := trimCaps(proc, allowed)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	limitsChanged := false
	if !allowed["CAP_SYS_RESOURCE"] {
		if limitsChanged, err = trimRlimits(proc); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	if !capsChanged && !limitsChanged {
		return nil
	}
	if nested {
		if doc["process"], err = json.Marshal(proc); err != nil {
			return err
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp := path + ".sriov-lane-tmp"
	if err := os.WriteFile(tmp, out, st.Mode().Perm()); err != nil {
		return fmt.Errorf("writing trimmed spec %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replacing spec %s: %w", path, err)
	}
	return nil
}

// trimCaps keeps in each of proc's capability lists only what allowed has.
func trimCaps(proc map[string]json.RawMessage, allowed map[string]bool) (bool, error) {
	rawCaps, ok := proc["capabilities"]
	if !ok || string(rawCaps) == "null" {
		return false, nil
	}
	var caps map[string]json.RawMessage
	if err := json.Unmarshal(rawCaps, &caps); err != nil {
		return false, fmt.Errorf("parsing capabilities: %w", err)
	}
	changed := false
	for kind, raw := range caps {
		var list []string
		if err := json.Unmarshal(raw, &list); err != nil {
			return false, fmt.Errorf("parsing %s capabilities: %w", kind, err)
		}
		kept := make([]string, 0, len(list))
		for _, c := range list {
			if allowed[c] {
				kept = append(kept, c)
			}
		}
		if len(kept) == len(list) {
			continue
		}
		changed = true
		var err error
		if caps[kind], err = json.Marshal(kept); err != nil {
			return false, err
		}
	}
	if !changed {
		return false, nil
	}
	var err error
	proc["capabilities"], err = json.Marshal(caps)
	return err == nil, err
}

// rlimitNumbers are the OCI rlimit names runc sets, by their number for
// getrlimit (asm-generic/resource.h).
var rlimitNumbers = map[string]int{
	"RLIMIT_CPU": 0, "RLIMIT_FSIZE": 1, "RLIMIT_DATA": 2, "RLIMIT_STACK": 3,
	"RLIMIT_CORE": 4, "RLIMIT_RSS": 5, "RLIMIT_NPROC": 6, "RLIMIT_NOFILE": 7,
	"RLIMIT_MEMLOCK": 8, "RLIMIT_AS": 9, "RLIMIT_LOCKS": 10, "RLIMIT_SIGPENDING": 11,
	"RLIMIT_MSGQUEUE": 12, "RLIMIT_NICE": 13, "RLIMIT_RTPRIO": 14, "RLIMIT_RTTIME": 15,
}

// trimRlimits lowers each of proc's rlimits to this process's hard limit,
// the most runc may set without CAP_SYS_RESOURCE.
func trimRlimits(proc map[string]json.RawMessage) (bool, error) {
	raw, ok := proc["rlimits"]
	if !ok || string(raw) == "null" {
		return false, nil
	}
	var limits []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &limits); err != nil {
		return false, fmt.Errorf("parsing rlimits: %w", err)
	}
	changed := false
	for _, lim := range limits {
		var name string
		if err := json.Unmarshal(lim["type"], &name); err != nil {
			return false, fmt.Errorf("parsing rlimit type: %w", err)
		}
		num, ok := rlimitNumbers[name]
		if !ok {
			continue
		}
		var own syscall.Rlimit
		if err := syscall.Getrlimit(num, &own); err != nil {
			return false, fmt.Errorf("getrlimit %s: %w", name, err)
		}
		for _, key := range []string{"hard", "soft"} {
			var v uint64
			if err := json.Unmarshal(lim[key], &v); err != nil {
				return false, fmt.Errorf("parsing %s %s: %w", name, key, err)
			}
			if v > own.Max {
				lim[key], _ = json.Marshal(own.Max)
				changed = true
			}
		}
	}
	if !changed {
		return false, nil
	}
	var err error
	proc["rlimits"], err = json.Marshal(limits)
	return err == nil, err
}

// findRealRunc prefers /usr/bin/runc, then any runc on PATH that is not this
// shim (so a shim installed as "runc" cannot exec itself in a loop).
func findRealRunc() (string, error) {
	self, _ := os.Executable()
	self, _ = filepath.EvalSymlinks(self)
	candidates := []string{"/usr/bin/runc"}
	for _, dir := range filepath.SplitList(os.Getenv("PATH") + ":/usr/sbin:/usr/local/bin:/sbin:/bin") {
		if dir != "" {
			candidates = append(candidates, filepath.Join(dir, "runc"))
		}
	}
	for _, c := range candidates {
		resolved, err := filepath.EvalSymlinks(c)
		if err != nil || resolved == self {
			continue
		}
		if st, err := os.Stat(resolved); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return c, nil
		}
	}
	if p, err := exec.LookPath("runc"); err == nil {
		if r, _ := filepath.EvalSymlinks(p); r != self {
			return p, nil
		}
	}
	return "", fmt.Errorf("real runc not found (looked in /usr/bin and PATH)")
}
