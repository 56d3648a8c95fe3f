package reset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sriov-lane/sriov-lane/pkg/atomicfile"
	"github.com/sriov-lane/sriov-lane/pkg/kube"
	"github.com/sriov-lane/sriov-lane/pkg/statedir"
)

// baselineVersion is the format of the baseline file; a reset that finds
// another refuses it rather than guess.
const baselineVersion = 1

// objectRef names one cluster-scoped object (namespaces are cluster-scoped
// too) by type, name and UID. The UID is what tells an object up left
// apart from one a job deleted and made again under the same name.
type objectRef struct {
	Group    string    `json:"group,omitempty"`
	Version  string    `json:"version"`
	Resource string    `json:"resource"`
	Kind     string    `json:"kind"`
	Name     string    `json:"name"`
	UID      types.UID `json:"uid"`
}

func (o objectRef) gvr() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: o.Group, Version: o.Version, Resource: o.Resource}
}

func (o objectRef) gr() schema.GroupResource {
	return schema.GroupResource{Group: o.Group, Resource: o.Resource}
}

func (o objectRef) String() string {
	if o.Group == "" && o.Resource == "namespaces" {
		return "namespace " + o.Name
	}
	return o.Kind + " " + o.Name
}

// Baseline is what the cluster held when up finished: every namespace and
// every cluster-scoped object of a type that can be listed and deleted.
type Baseline struct {
	Version    int         `json:"version"`
	Recorded   time.Time   `json:"recorded"`
	Namespaces []objectRef `json:"namespaces"`
	Objects    []objectRef `json:"objects"`
	// Unlisted are the group/versions whose objects were not read (their
	// discovery or listing failed, or another API server serves them):
	// reset cannot tell what of theirs is new, so it leaves them alone.
	Unlisted []string `json:"unlisted,omitempty"`
}

// Record reads the cluster as it is now: the baseline up ends with.
func Record(ctx context.Context, kc *kube.Clients, now time.Time) (*Baseline, error) {
	st, err := readCluster(ctx, kc, nil)
	if err != nil {
		return nil, err
	}
	b := &Baseline{Version: baselineVersion, Recorded: now.UTC(), Unlisted: st.Unlisted}
	for _, o := range st.Namespaces {
		b.Namespaces = append(b.Namespaces, o.objectRef)
	}
	for _, o := range st.Objects {
		b.Objects = append(b.Objects, o.objectRef)
	}
	// A type whose list failed now cannot be told apart later either.
	for gvr := range st.ListErrors {
		b.Unlisted = append(b.Unlisted, gvr.GroupVersion().String())
	}
	slices.Sort(b.Unlisted)
	b.Unlisted = slices.Compact(b.Unlisted)
	return b, nil
}

// Save writes b into the lane dir, where down removes it with the lane. A
// file there is not a host change, so it is not journalled; it is written
// atomically so that a kill leaves the previous file or none.
func Save(dir statedir.LaneDir, b *Baseline) error {
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(dir.Baseline(), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("saving the baseline: %w", err)
	}
	return nil
}

// ErrNoBaseline is a lane up brought up before up recorded baselines.
var ErrNoBaseline = errors.New("no baseline")

// Load reads the baseline up saved in lane's directory dir; a lane without
// one, or with one of another format, cannot be reset and the error says
// what to do.
func Load(lane string, dir statedir.LaneDir) (*Baseline, error) {
	data, err := os.ReadFile(dir.Baseline())
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("lane %s has %w (%s): it was brought up by a sriov-lane that did not record one; run 'sriov-lane down --name %s', then 'sriov-lane up', to get a lane that can be reset",
			lane, ErrNoBaseline, dir.Baseline(), lane)
	}
	if err != nil {
		return nil, fmt.Errorf("lane %s: reading its baseline: %w", lane, err)
	}
	var b Baseline
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("lane %s: reading its baseline %s: %w", lane, dir.Baseline(), err)
	}
	if b.Version != baselineVersion {
		return nil, fmt.Errorf("lane %s: its baseline %s has version %d, this sriov-lane reads %d; run 'sriov-lane down --name %s', then 'sriov-lane up'",
			lane, dir.Baseline(), b.Version, baselineVersion, lane)
	}
	return &b, nil
}

// Lost says whether the cluster is no longer the one b was recorded on: no
// namespace of b is left under its UID. A k3s server restarted with its
// datastore on a tmpfs (server.datastoreOnTmpfs) starts on an empty one
// and makes default, kube-system and the others again, under new UIDs:
// everything up applied is gone, and the baseline with it. A namespace
// that a job deleted and made again does not make a cluster lost, since
// kube-system and kube-public stay.
func Lost(ctx context.Context, kc *kube.Clients, b *Baseline) (bool, error) {
	if len(b.Namespaces) == 0 {
		return false, nil
	}
	for _, ref := range b.Namespaces {
		ns, err := kc.Typed.CoreV1().Namespaces().Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("reading namespace %s: %w", ref.Name, err)
		}
		if ns.UID == ref.UID {
			return false, nil
		}
	}
	return true, nil
}
