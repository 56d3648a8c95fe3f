package vm

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestParseResults(t *testing.T) {
	stream := strings.Join([]string{
		`{"kind":"module","name":"igb.ko","duration":1000}`,
		`{"kind":"module","name":"veth.ko","error":"finit_module: exec format error"}`,
		`{"kind":"run","name":"a","output":"hi\n","duration":2000000000}`,
		`{"kind":"run","name":"b","exit":3}`,
		`{"kind":"file","name":"x/y","data":"aGVsbG8="}`,
		`{"kind":"file","name":"z","data":"H4sIAAAAAAAC/8tIzcnJBwCGphA2BQAAAA==","gzip":true}`,
		`{"kind":"end"}`,
	}, "\r\n") + "\r\n"
	var res Result
	if err := parseResults([]byte(stream), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Modules) != 2 || res.Modules[1].Error == "" || res.Modules[0].Error != "" {
		t.Errorf("modules = %+v", res.Modules)
	}
	if len(res.Runs) != 2 || res.Runs[0] != (Run{Name: "a", Output: "hi\n", Duration: 2 * time.Second}) || res.Runs[1].Exit != 3 {
		t.Errorf("runs = %+v", res.Runs)
	}
	if string(res.Files["x/y"]) != "hello" || string(res.Files["z"]) != "hello" {
		t.Errorf("files = %q", res.Files)
	}
}

func TestParseResultsRejects(t *testing.T) {
	for name, stream := range map[string]string{
		"no end record (the guest died)": `{"kind":"run","name":"a"}` + "\n",
		"empty stream":                   "",
		"truncated line":                 `{"kind":"run","name":"a"}` + "\n" + `{"kind":"fi`,
		"guest-init error":               `{"kind":"error","error":"boom"}` + "\n" + `{"kind":"end"}` + "\n",
		"record after the end":           `{"kind":"end"}` + "\n" + `{"kind":"run","name":"a"}` + "\n",
		"bad gzip":                       `{"kind":"file","name":"z","data":"aGVsbG8=","gzip":true}` + "\n" + `{"kind":"end"}` + "\n",
		"unknown kind":                   `{"kind":"what"}` + "\n" + `{"kind":"end"}` + "\n",
	} {
		if err := parseResults([]byte(stream), &Result{}); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
}

// A guest that dies before its end record fails with the kernel's name,
// the console's last lines and the QEMU command line.
func TestCollectMissingEndRecord(t *testing.T) {
	var console []string
	for i := 1; i <= 100; i++ {
		console = append(console, fmt.Sprintf("console line %d", i))
	}
	res := &Result{Console: strings.Join(console, "\r\n") + "\r\n", Command: []string{"qemu-system-x86_64", "-accel", "tcg"}}
	err := collect("bookworm-6.1", []byte(`{"kind":"module","name":"igb.ko"}`+"\n"), res)
	if err == nil {
		t.Fatal("a stream without the end record was accepted")
	}
	msg := err.Error()
	for _, want := range []string{"kernel bookworm-6.1", "no end record", "console line 41\n", "console line 100", "QEMU: qemu-system-x86_64 -accel tcg"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "console line 40\n") {
		t.Errorf("error holds more than the last %d console lines:\n%s", consoleTailLines, msg)
	}
	if err := collect("k", []byte(`{"kind":"end"}`+"\n"), res); err != nil {
		t.Errorf("a complete stream: %v", err)
	}
}

func TestShellLine(t *testing.T) {
	got := shellLine([]string{"qemu-system-x86_64", "-append", "console=ttyS0 intel_iommu=on", "-serial", "file:/tmp/a b", "it's", ""})
	want := `qemu-system-x86_64 -append 'console=ttyS0 intel_iommu=on' -serial 'file:/tmp/a b' 'it'\''s' ''`
	if got != want {
		t.Errorf("shellLine = %s\nwant        %s", got, want)
	}
}
