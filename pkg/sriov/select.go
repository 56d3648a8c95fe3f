package sriov

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Selection narrows which PFs may be taken. Entries are interface names,
// PCI addresses or filepath.Match globs of either.
type Selection struct {
	Include []string `json:"include,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
}

// matches reports whether any pattern names the PF.
func matches(patterns []string, pf PF) bool {
	for _, p := range patterns {
		for _, v := range []string{pf.Name, pf.PCI} {
			if v == "" {
				continue
			}
			if p == v {
				return true
			}
			if ok, err := filepath.Match(p, v); err == nil && ok {
				return true
			}
		}
	}
	return false
}

// namedExactly reports whether a pattern is the PF's very name or PCI
// address, as opposed to a glob that happens to cover it.
func namedExactly(patterns []string, pf PF) bool {
	for _, p := range patterns {
		if (pf.Name != "" && p == pf.Name) || (pf.PCI != "" && p == pf.PCI) {
			return true
		}
	}
	return false
}

// Allows says whether the selection lets the PF be chosen, and if not, why.
// Exclusion wins over inclusion. A PF the host uses (default route, global
// address) is taken only when the include list names it exactly: taking it
// cuts the host off its network, and a glob such as "ens*" written for the
// spare ports must not do that by accident.
func (s Selection) Allows(pf PF) (bool, string) {
	if matches(s.Exclude, pf) {
		return false, "excluded by pfs.exclude"
	}
	if len(s.Include) > 0 && !matches(s.Include, pf) {
		return false, "not matched by pfs.include"
	}
	if pf.InUse() && !namedExactly(s.Include, pf) {
		return false, fmt.Sprintf("in use by the host (%s): only its exact name %s or PCI address %s in pfs.include takes it, never a glob",
			pf.usage(), pf.Name, pf.PCI)
	}
	return true, ""
}

// usage says what of the host's networking runs over the PF.
func (p PF) usage() string {
	var u []string
	if p.DefaultRoute {
		u = append(u, "default route")
	}
	if p.GlobalAddress {
		u = append(u, "global address")
	}
	return strings.Join(u, ", ")
}
