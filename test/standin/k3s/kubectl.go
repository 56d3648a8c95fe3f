package main

import (
	"context"
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// kubectl implements only what k3d's node entrypoint runs on servers
// (`kubectl uncordon $HOSTNAME` at start, `kubectl drain` at stop); every
// other use fails loudly so nobody mistakes this for a real kubectl.
func kubectl(args []string) int {
	if len(args) >= 2 && (args[0] == "uncordon" || args[0] == "cordon" || args[0] == "drain") {
		unschedulable := args[0] != "uncordon"
		if err := setUnschedulable(args[1], unschedulable); err != nil {
			fmt.Fprintf(os.Stderr, "stand-in kubectl %s %s: %v\n", args[0], args[1], err)
			return 1
		}
		fmt.Printf("node/%s %sed (stand-in kubectl)\n", args[1], args[0])
		return 0
	}
	fmt.Fprintf(os.Stderr, "stand-in k3s has no kubectl (only uncordon/cordon/drain NODE for k3d's entrypoint); use client-go against the kubeconfig instead (args: %q)\n", args)
	return 1
}

func setUnschedulable(node string, unschedulable bool) error {
	path := firstNonEmpty(os.Getenv("KUBECONFIG"), localKubeconfig)
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading kubeconfig: %w", err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return fmt.Errorf("parsing kubeconfig %s: %w", path, err)
	}
	cfg.Timeout = 5 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, unschedulable)
	_, err = client.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}
