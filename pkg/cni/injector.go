package cni

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// network-resources-injector (the injector) is a mutating admission webhook: for a
// pod that names NetworkAttachmentDefinitions in k8s.v1.cni.cncf.io/networks
// it reads each NAD's k8s.v1.cni.cncf.io/resourceName annotation and adds
// one of that resource per network to the first container's requests and
// limits (k8snetworkplumbingwg/network-resources-injector
// pkg/webhook/webhook.go@v1.9.0 parseNetworkAttachDefinition,
// createResourcePatch), so a pod gets its VF without asking for
// kubevirt.io/sriov_net itself, as on kubevirtci's kind-sriov (kubevirt/kubevirtci
// cluster-up/cluster/kind-sriov/config_sriov_cluster.sh@39bd4947ba4d deploys
// it).
//
// The objects follow the release's deployments/ manifests, except that the
// lane makes the webhook's certificate (injectorcert.go) instead of upstream's
// installer init container. See TestConformanceInjector for every fact and
// deviation.

// InjectorVersion is the pinned release (the latest tag of
// k8snetworkplumbingwg/network-resources-injector when this was written).
const InjectorVersion = "v1.9.0"

// InjectorImage is the release image, pinned to the tag: upstream's manifest names
// network-resources-injector:latest; the release workflow pushes
// ghcr.io/k8snetworkplumbingwg/network-resources-injector:<tag>
// (k8snetworkplumbingwg/network-resources-injector
// .github/workflows/image-push-release.yml@v1.9.0), the image kubevirtci runs
// (kubevirt/kubevirtci cluster-up/cluster/kind-sriov/sriov-components/manifests/network_resources_injector/server.yaml@39bd4947ba4d).
const InjectorImage = "ghcr.io/k8snetworkplumbingwg/network-resources-injector:" + InjectorVersion

// InjectorUpstream are the manifests the injector's objects follow.
var InjectorUpstream = []string{
	"k8snetworkplumbingwg/network-resources-injector deployments/auth.yaml@" + InjectorVersion,
	"k8snetworkplumbingwg/network-resources-injector deployments/service.yaml@" + InjectorVersion,
	"k8snetworkplumbingwg/network-resources-injector deployments/server.yaml@" + InjectorVersion,
	"k8snetworkplumbingwg/network-resources-injector deployments/webhook.yaml@" + InjectorVersion,
}

// Names, all upstream's (k8snetworkplumbingwg/network-resources-injector
// deployments/*.yaml@v1.9.0) except the Secret's, which is the one
// server.yaml's closing comment names for a certificate the installer does
// not make.
const (
	InjectorName           = "network-resources-injector"
	InjectorNamespace      = "kube-system"
	InjectorService        = "network-resources-injector-service"
	InjectorSecret         = "network-resources-injector-secret"
	InjectorWebhookConfig  = "network-resources-injector-config"
	injectorSA             = "network-resources-injector-sa"
	injectorConfigMapsRole = "network-resources-injector-configmaps"
	injectorWebhookName    = "network-resources-injector-config.k8s.io"
	injectorTLSDir         = "/etc/tls"
	injectorPort           = 8443
	injectorHealthPort     = 8444
)

// InjectorOptions switch the injector on and carry its certificate.
type InjectorOptions struct {
	// Enabled deploys the injector (components.networkResourcesInjector).
	Enabled bool
	// Cert is the webhook's serving certificate and CA. nil renders
	// placeholders (plan, manifests/); up fills it with WithWebhookCerts.
	Cert *WebhookCert
}

// injectorObjects are the injector's RBAC, its TLS Secret, Service and
// Deployment, and the MutatingWebhookConfiguration, which SortForApply puts
// after the Deployment.
func injectorObjects(o Options) []runtime.Object {
	cert := o.NetworkResourcesInjector.Cert
	if cert == nil {
		cert = placeholderWebhookCert()
	}
	labels := map[string]string{"app": InjectorName}
	sa := &corev1.ServiceAccount{TypeMeta: typeServiceAccount, ObjectMeta: ObjectMeta(injectorSA, InjectorNamespace, nil)}
	role := &rbacv1.ClusterRole{
		TypeMeta:   typeClusterRole,
		ObjectMeta: ObjectMeta(InjectorName, "", nil),
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"", "k8s.cni.cncf.io", "extensions", "apps"},
			Resources: []string{"replicationcontrollers", "replicasets", "daemonsets", "statefulsets", "pods", "network-attachment-definitions"},
			Verbs:     []string{"*"},
		}},
	}
	// The webhook reads its nri-control-switches ConfigMap
	// (k8snetworkplumbingwg/network-resources-injector cmd/webhook/main.go@v1.9.0).
	cmRole := &rbacv1.ClusterRole{
		TypeMeta:   typeClusterRole,
		ObjectMeta: ObjectMeta(injectorConfigMapsRole, "", nil),
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}},
	}
	bind := func(name, role string) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{
			TypeMeta:   typeClusterRoleBinding,
			ObjectMeta: ObjectMeta(name, "", nil),
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: injectorSA, Namespace: InjectorNamespace}},
		}
	}
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: ObjectMeta(InjectorSecret, InjectorNamespace, labels),
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey:       cert.Cert,
			corev1.TLSPrivateKeyKey: cert.Key,
			"ca.crt":                cert.CA,
		},
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: ObjectMeta(InjectorService, InjectorNamespace, nil),
		Spec: corev1.ServiceSpec{
			Ports:    []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromInt32(injectorPort)}},
			Selector: labels,
		},
	}
	dep := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: ObjectMeta(InjectorName, InjectorNamespace, labels),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: selectorOn(labels, "app"),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: podMeta(labels),
				Spec: corev1.PodSpec{
					ServiceAccountName: injectorSA,
					Containers: []corev1.Container{{
						Name:            "webhook-server",
						Image:           o.image(InjectorImage),
						ImagePullPolicy: corev1.PullIfNotPresent,
						Command:         []string{"webhook"},
						Args: []string{
							"-bind-address=0.0.0.0",
							"-port=8443",
							"-tls-private-key-file=" + injectorTLSDir + "/" + corev1.TLSPrivateKeyKey,
							"-tls-cert-file=" + injectorTLSDir + "/" + corev1.TLSCertKey,
							"-health-check-port=8444",
							"-logtostderr",
							// kubevirtci's two additions: decisions in
							// the log, and no client certificate asked of
							// the API server, which presents none.
							"-v=2",
							"-insecure",
						},
						Env: []corev1.EnvVar{fieldEnv("NAMESPACE", "metadata.namespace")},
						SecurityContext: &corev1.SecurityContext{
							RunAsUser:                ptr.To[int64](10000),
							RunAsGroup:               ptr.To[int64](10000),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_BIND_SERVICE"}},
							ReadOnlyRootFilesystem:   ptr.To(true),
							AllowPrivilegeEscalation: ptr.To(false),
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "tls", MountPath: injectorTLSDir}},
						Resources:    resources("250m", "50Mi", "500m", "200Mi"),
						LivenessProbe: &corev1.Probe{
							ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(injectorHealthPort)}},
							InitialDelaySeconds: 10,
							PeriodSeconds:       5,
						},
					}},
					Volumes: []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{
						Secret: &corev1.SecretVolumeSource{SecretName: InjectorSecret},
					}}},
				},
			},
		},
	}
	return []runtime.Object{
		sa, role, cmRole,
		bind("network-resources-injector-role-binding", InjectorName),
		bind("network-resources-injector-configmaps-role-binding", injectorConfigMapsRole),
		secret, svc, dep,
		injectorWebhookConfiguration(cert.CA),
	}
}

// injectorWebhookConfiguration sends every pod CREATE outside kube-system to the
// injector, trusting caBundle for its serving certificate.
//
// failurePolicy is Ignore where upstream has Fail
// (k8snetworkplumbingwg/network-resources-injector deployments/webhook.yaml@v1.9.0
// leaves the v1 default, Fail; cmd/installer/main.go@v1.9.0 defaults to Fail): the lane's
// primary CNI runs outside kube-system (kube-flannel; calico-system,
// tigera-operator), and the injector's pods need that CNI before the API
// server can reach them. With Fail, the first up would deadlock (no CNI pod
// admitted until the injector runs, no injector until the CNI runs), and so
// would a lane whose nodes restart. up waits for the Deployment to be
// Available and for the API server to reach the injector
// (WaitInjectorServing), so pods created after up get their resources; a
// pod admitted while the injector is down gets none and fails visibly in
// sriov-cni instead of being refused.
func injectorWebhookConfiguration(caBundle []byte) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: ObjectMeta(InjectorWebhookConfig, "", nil),
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    injectorWebhookName,
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service:  &admissionregistrationv1.ServiceReference{Name: InjectorService, Namespace: InjectorNamespace, Path: ptr.To("/mutate")},
				CABundle: caBundle,
			},
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{InjectorNamespace},
			}}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups:   []string{"apps", ""},
					APIVersions: []string{"v1"},
					Resources:   []string{"pods"},
				},
			}},
		}},
	}
}
