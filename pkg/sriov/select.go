package sriov

import "path/filepath"

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

// Allows says whether the selection lets the PF be chosen, and if not, why.
// Exclusion wins over inclusion. A PF the host uses (default route, global
// address) needs an explicit include.
func (s Selection) Allows(pf PF) (bool, string) {
	if matches(s.Exclude, pf) {
		return false, "excluded"
	}
	included := matches(s.Include, pf)
	if len(s.Include) > 0 && !included {
		return false, "not included"
	}
	if pf.InUse() && !included {
		return false, "in use by the host (default route or global address)"
	}
	return true, ""
}
