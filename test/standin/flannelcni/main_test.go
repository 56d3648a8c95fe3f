package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
)

func TestAddDelegatesToBridgeOnTheLeasedSubnetAndDelUndoesIt(t *testing.T) {
	dir := t.TempDir()
	subnetFile := filepath.Join(dir, "subnet.env")
	if err := os.WriteFile(subnetFile, []byte("FLANNEL_NETWORK=10.42.0.0/16\nFLANNEL_SUBNET=10.42.1.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A fake bridge plugin records its config and command, answers a result.
	binDir := filepath.Join(dir, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\ncat > " + dir + "/bridge-$CNI_COMMAND.json\n" +
		`[ "$CNI_COMMAND" = ADD ] && echo '{"cniVersion":"0.3.1","ips":[{"version":"4","address":"10.42.1.5/24"}]}'` + "\nexit 0\n"
	if err := os.WriteFile(filepath.Join(binDir, "bridge"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CNI_PATH", binDir)
	t.Setenv("CNI_NETNS", "/var/run/netns/x")
	t.Setenv("CNI_IFNAME", "eth0")
	t.Setenv("CNI_CONTAINERID", "c1")
	conf := `{"cniVersion":"0.3.1","name":"cbr0","type":"flannel","subnetFile":"` + subnetFile + `","dataDir":"` + filepath.Join(dir, "data") +
		`","delegate":{"hairpinMode":true,"isDefaultGateway":true}}`
	args := &skel.CmdArgs{ContainerID: "c1", Netns: "/var/run/netns/x", IfName: "eth0", StdinData: []byte(conf)}

	t.Setenv("CNI_COMMAND", "ADD")
	stdout := os.Stdout
	r, w, _ := os.Pipe()
	os.Stdout = w
	err := cmdAdd(args)
	os.Stdout = stdout
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 4096)
	nOut, _ := r.Read(out)
	if !strings.Contains(string(out[:nOut]), "10.42.1.5/24") {
		t.Errorf("ADD printed %q, want the delegate's result", out[:nOut])
	}
	raw, err := os.ReadFile(filepath.Join(dir, "bridge-ADD.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"cniVersion": "0.3.1", "name": "cbr0", "type": "bridge", "hairpinMode": true, "isDefaultGateway": true,
		"isGateway": true, "ipMasq": false, "mtu": float64(1450),
		"ipam": map[string]any{"type": "host-local",
			"ranges": []any{[]any{map[string]any{"subnet": "10.42.1.0/24"}}},
			"routes": []any{map[string]any{"dst": "10.42.0.0/16"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("delegate conf\n%v\nwant\n%v", got, want)
	}

	t.Setenv("CNI_COMMAND", "DEL")
	if err := cmdDel(args); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "bridge-DEL.json")); err != nil {
		t.Errorf("DEL did not reach the delegate: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "c1")); !os.IsNotExist(err) {
		t.Errorf("saved delegate conf left behind: %v", err)
	}
	if err := cmdDel(args); err != nil {
		t.Errorf("second DEL: %v", err)
	}
}

func TestAddWithoutSubnetFileFails(t *testing.T) {
	args := &skel.CmdArgs{ContainerID: "c1", StdinData: []byte(`{"cniVersion":"0.3.1","name":"cbr0","type":"flannel","subnetFile":"/nonexistent/subnet.env"}`)}
	if err := cmdAdd(args); err == nil || !strings.Contains(err.Error(), "flanneld") {
		t.Errorf("cmdAdd = %v, want an error naming flanneld", err)
	}
}
