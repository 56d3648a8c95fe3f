package reset

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sriov-lane/sriov-lane/pkg/kube"
	"github.com/sriov-lane/sriov-lane/test/apiserver"
)

// readCluster reads each PV's claim and provisioner for the plan.
func TestReadClusterReadsPVFacts(t *testing.T) {
	t.Parallel() // a control plane of its own, on a slot of its own
	_, kc := apiserver.ClientsForTest(t, kube.ForConfig)
	ctx := t.Context()
	hostPath := &corev1.HostPathVolumeSource{Path: "/var/lib/rancher/k3s/storage/pvc-1_job-1_data"}
	for _, pv := range []*corev1.PersistentVolume{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "pvc-1", Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": "rancher.io/local-path"}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: hostPath},
				ClaimRef:                      &corev1.ObjectReference{Namespace: "job-1", Name: "data"},
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "static"},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: hostPath},
			},
		},
	} {
		if _, err := kc.Typed.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := readCluster(ctx, kc, systemType)
	if err != nil {
		t.Fatal(err)
	}
	if f := st.PVs["pvc-1"]; f.ClaimNamespace != "job-1" || !f.Provisioned {
		t.Errorf("pvc-1: %+v", f)
	}
	if f, ok := st.PVs["static"]; !ok || f.Provisioned || f.ClaimNamespace != "" {
		t.Errorf("static: %+v %v", f, ok)
	}
}
