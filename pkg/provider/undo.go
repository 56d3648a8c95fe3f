package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/sriov-lane/sriov-lane/pkg/journal"
)

// Journal operations this package defines. Journal them with a
// ClusterRecord before calling Create.
const (
	OpCluster  = "provider.cluster"
	OpRegistry = "provider.registry"
)

// ClusterRecord is the journal data of OpCluster and OpRegistry.
type ClusterRecord struct {
	Name string `json:"name"`
}

// Undoers reverses the provider's journalled operations. Both delete by
// name and treat "not found" as success, noting it.
func Undoers(p *Provider) journal.Undoers {
	return journal.Undoers{
		OpCluster: func(ctx context.Context, e *journal.Entry) (string, error) {
			var r ClusterRecord
			if err := e.Decode(&r); err != nil {
				return "", err
			}
			del := p.delete
			if !e.Done {
				del = p.deleteInterruptedCreate
			}
			removed, err := del(ctx, r.Name)
			if err != nil {
				return "", err
			}
			if len(removed) == 0 {
				return fmt.Sprintf("cluster %s was already gone", r.Name), nil
			}
			return "removed " + strings.Join(removed, ", "), nil
		},
		OpRegistry: journal.UndoRecord(func(ctx context.Context, r ClusterRecord) (string, error) {
			ok, err := p.deleteRegistry(ctx, r.Name)
			if err != nil {
				return "", err
			}
			if !ok {
				return fmt.Sprintf("registry %s was already gone", RegistryName(r.Name)), nil
			}
			return "", nil
		}),
	}
}
