package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sriov-lane/sriov-lane/test/vfiouser"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: vfio-hold VFIO-DIR GROUP BDF (holds the VFIO device until SIGTERM or SIGINT)")
		os.Exit(2)
	}
	h, err := vfiouser.HoldDevice(os.Args[1], os.Args[2], os.Args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Only the device fd stays, as after QEMU closed the group: what blocks
	// the VF's release on a real kernel.
	if err := h.CloseGroup(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("holding", os.Args[3])
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	if err := h.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
