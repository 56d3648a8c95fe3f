package smoke

import (
	"bytes"
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
)

// execTimeout bounds one command in the smoke pod.
const execTimeout = 30 * time.Second

// execInPod runs cmd in a pod's container through the API server's exec
// subresource, without stdin or a TTY, and returns what it printed. Like
// kubectl exec it speaks WebSocket first and falls back to SPDY when the
// upgrade fails (k8s.io/kubectl pkg/cmd/exec/exec.go@v0.36.3,
// createExecutor). Since v0.37 remotecommand reports a failed upgrade as
// k8s.io/streaming's UpgradeFailureError, which apimachinery's
// httpstream.IsUpgradeFailure (what kubectl v0.36 asks) does not match.
func execInPod(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, ns, pod, container string, cmd ...string) CmdOutput {
	out := CmdOutput{Cmd: cmd}
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		out.Err = err
		return out
	}
	// RFC 6455 wants GET for the WebSocket handshake.
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		out.Err = err
		return out
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		out.Err = err
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, execTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	out.Err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	out.Stdout, out.Stderr = stdout.String(), stderr.String()
	return out
}
