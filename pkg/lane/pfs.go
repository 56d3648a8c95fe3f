package lane

import (
	"context"
	"fmt"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

// selection maps the lane's PF include/exclude lists to pkg/sriov's.
func selection(l *config.Lane) sriov.Selection {
	return sriov.Selection{Include: l.PFs.Include, Exclude: l.PFs.Exclude}
}

// PFReportFunc returns the PF discovery `check` uses: the same discovery,
// selection and leases `up` uses, without taking anything.
func PFReportFunc(l *config.Lane) func(context.Context) (PFReport, error) {
	return func(ctx context.Context) (PFReport, error) {
		sys := sriov.Sysfs{Root: l.SysfsRoot}
		pfs, err := sriov.Discover(sys)
		if err != nil {
			return PFReport{}, err
		}
		leases, err := sriov.NewLeaser(l.StateDir).Leases()
		if err != nil {
			return PFReport{}, err
		}
		sel := selection(l)
		var rep PFReport
		for _, pf := range pfs {
			s := PFSummary{Name: pf.Name, PCI: pf.PCI, Driver: pf.Driver, TotalVFs: pf.TotalVFs, VFs: vfStatuses(sys, pf.PCI),
				EmulationReport: pf.EmulationReport}
			if ls, ok := leases[pf.PCI]; ok {
				s.Note = fmt.Sprintf("leased by lane %q", ls.Lane)
				if s.Name == "" {
					s.Name = ls.Name
				}
				rep.Excluded = append(rep.Excluded, s)
				continue
			}
			if ok, why := sel.Allows(pf); !ok {
				s.Note = why
				rep.Excluded = append(rep.Excluded, s)
				continue
			}
			if !pf.Present {
				s.Note = "not in this network namespace"
				rep.Excluded = append(rep.Excluded, s)
				continue
			}
			rep.Usable = append(rep.Usable, s)
		}
		return rep, nil
	}
}
