package main

import (
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/cmd"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/test/docexample"
)

// contributorDocs are docs/'s pages for those who work on sriov-lane: their
// commands are the rig's and the bench's, run by make test and make bench.
var contributorDocs = []string{"docs/design.md", "docs/testing.md", "docs/kernel-tier.md", "docs/figures.md", "docs/dra-upstream-reading.md", "docs/fleet-upstream-reading.md"}

// Every command example of the user docs is run by a test, which takes it
// from the docs (docexample.Lookup), or says in its comment that it needs
// an SR-IOV host; a sriov-lane example, run or not, is one the CLI takes:
// its command, flags, arguments and environment exist. So no example goes
// stale.
func TestDocExamples(t *testing.T) {
	const root = "../.."
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		rel, _ := filepath.Rel(root, p)
		if !slices.Contains(docexample.UserDocs, rel) && !slices.Contains(contributorDocs, rel) {
			t.Errorf("%s is in neither docexample.UserDocs nor contributorDocs: say whom it is for", rel)
		}
	}
	examples, err := docexample.Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(examples) < 10 {
		t.Fatalf("%d examples in the user docs: the reader lost them", len(examples))
	}
	run := lookups(t, root)
	envs := settingEnvs()
	seen := map[string]bool{}
	for _, e := range examples {
		seen[e.Command] = true
		host := strings.Contains(e.Comment, docexample.HostMark)
		switch {
		case run[e.Command] != "" && host:
			t.Errorf("%s: run by %s, yet its comment says it needs an %s", e, run[e.Command], docexample.HostMark)
		case run[e.Command] == "" && !host:
			t.Errorf("%s: no test runs it (docexample.Lookup) and its comment does not say it needs an %s", e, docexample.HostMark)
		}
		if len(e.Args) == 0 || filepath.Base(e.Args[0]) != "sriov-lane" {
			continue
		}
		for _, kv := range e.Env {
			if name, _, _ := strings.Cut(kv, "="); !envs[name] {
				t.Errorf("%s: sriov-lane reads no environment variable %s", e, name)
			}
		}
		if err := parses(e.Args[1:]); err != nil {
			t.Errorf("%s: the CLI refuses it: %v", e, err)
		}
	}
	for c, by := range run {
		if !seen[c] {
			t.Errorf("%s runs the example %q, which no user page has", by, c)
		}
	}
}

// parses reports whether the CLI takes args: the command exists, and its
// flags and arguments are valid.
func parses(args []string) error {
	root := cmd.NewRoot(cmd.IOStreams{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard})
	c, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if err := c.ParseFlags(rest); err != nil {
		return err
	}
	return c.ValidateArgs(c.Flags().Args())
}

// settingEnvs are the environment variables sriov-lane reads.
func settingEnvs() map[string]bool {
	out := map[string]bool{"SRIOV_LANE_CONFIG": true}
	for _, s := range config.Settings() {
		for _, e := range s.Env {
			out[e] = true
		}
	}
	return out
}

// lookupCall is a docexample.Lookup call with its command as a string
// literal, the only way a test names the example it runs.
var lookupCall = regexp.MustCompile("docexample\\.Lookup\\(\\w+, (\"(?:[^\"\\\\]|\\\\.)*\"|`[^`]*`)\\)")

// lookups maps each example command a test under root runs to the file
// that runs it.
func lookups(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "bin" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range lookupCall.FindAllStringSubmatch(string(b), -1) {
			c, err := strconv.Unquote(m[1])
			if err != nil {
				t.Errorf("%s: %s: %v", p, m[0], err)
				continue
			}
			rel, _ := filepath.Rel(root, p)
			out[c] = rel
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The config file example of the user docs (a yaml block of kind Lane) is
// one sriov-lane reads, and where a line's comment names flags and
// environment variables, they are its field's, all of them.
func TestDocConfigExample(t *testing.T) {
	const root = "../.."
	settings := map[string]config.Setting{}
	for _, s := range config.Settings() {
		settings[s.Field] = s
	}
	found := 0
	for _, page := range docexample.UserDocs {
		blocks, err := docexample.Blocks(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			if b.Lang != "yaml" || !strings.Contains(b.Text(), "kind: Lane") {
				continue
			}
			found++
			var l config.Lane
			if err := config.DecodeStrict([]byte(b.Text()), &l); err != nil {
				t.Errorf("%s:%d: sriov-lane refuses the example: %v", page, b.Line, err)
			}
			for _, c := range fieldComments(b.Text()) {
				s, ok := settings[c.path]
				if !ok {
					t.Errorf("%s:%d: %s has no flag or environment variable, yet the comment names %v", page, b.Line+c.line, c.path, c.names)
					continue
				}
				want := append([]string{"--" + s.Flag}, s.Env...)
				if s.Flag == "" {
					want = want[1:]
				}
				if !slices.Equal(c.names, want) {
					t.Errorf("%s:%d: the comment of %s names %v; its setting has %v", page, b.Line+c.line, c.path, c.names, want)
				}
			}
		}
	}
	if found != 1 {
		t.Errorf("%d config file examples in the user docs, want 1", found)
	}
}

type fieldComment struct {
	line  int // within the block, from 1
	path  string
	names []string // the flags and environment variables, as written
}

var envName = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// fieldComments finds each line of a config file whose comment starts with
// the field's flag or environment variables ("--name, SRIOV_LANE_NAME;
// what it means"), with the field's dotted path.
func fieldComments(text string) []fieldComment {
	var out []fieldComment
	var parents []string // the keys of the enclosing maps, by indentation
	var indents []int
	for i, line := range strings.Split(text, "\n") {
		body, comment, _ := strings.Cut(line, "#")
		key, _, ok := strings.Cut(strings.TrimSpace(body), ":")
		if !ok || key == "" {
			continue
		}
		indent := len(body) - len(strings.TrimLeft(body, " "))
		for len(indents) > 0 && indents[len(indents)-1] >= indent {
			indents, parents = indents[:len(indents)-1], parents[:len(parents)-1]
		}
		path := strings.Join(append(slices.Clone(parents), key), ".")
		indents, parents = append(indents, indent), append(parents, key)
		first, _, _ := strings.Cut(comment, ";")
		var names []string
		for _, w := range strings.Split(first, ",") {
			w, _, _ = strings.Cut(strings.TrimSpace(w), "=")
			if strings.HasPrefix(w, "--") || envName.MatchString(w) {
				names = append(names, w)
			}
		}
		if len(names) > 0 {
			out = append(out, fieldComment{line: i + 1, path: path, names: names})
		}
	}
	return out
}

// The README's make help, run: it lists the targets the README names.
func TestDocMakeHelp(t *testing.T) {
	e := docexample.Lookup(t, "make help")
	out, err := exec.Command(e.Args[0], append([]string{"-C", "../.."}, e.Args[1:]...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", e, err, out)
	}
	for _, target := range []string{"lane", "test", "demo", "verify", "docs"} {
		if !regexp.MustCompile(`(?m)^  ` + target + ` `).Match(out) {
			t.Errorf("%s lists no target %s:\n%s", e, target, out)
		}
	}
}

// The README's make test is what CI runs, from a fresh clone
// (.ci/run): CI runs the example.
func TestDocMakeTestIsWhatCIRuns(t *testing.T) {
	e := docexample.Lookup(t, "make test")
	b, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(e.Command) + `$`).Match(b) {
		t.Errorf(".ci/run does not run the README's %q", e.Command)
	}
}

// The configuration page's plan examples, run here: plan changes nothing
// and needs no PF (on a host without, it plans with placeholders).
func TestDocPlanExamples(t *testing.T) {
	t.Setenv("SRIOV_LANE_SYSFS_ROOT", t.TempDir()) // this machine's PFs are none of plan's business here
	for _, c := range []struct {
		e    docexample.Example
		want []string
	}{
		{docexample.Lookup(t, "sriov-lane plan --config-only --ip-family dual --topology-manager-scope pod"),
			[]string{"ipFamily: dual", "topologyManagerScope: pod"}},
		{docexample.Lookup(t, "sriov-lane plan --network-resources-injector=true"),
			[]string{"networkResourcesInjector: true", "kind: MutatingWebhookConfiguration"}},
	} {
		runExample(t, c.e, c.want)
	}
}

// runExample runs the sriov-lane example e in this process and expects
// each of want in what it prints.
func runExample(t *testing.T, e docexample.Example, want []string) {
	t.Helper()
	var out, errOut strings.Builder
	root := cmd.NewRoot(cmd.IOStreams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	root.SetArgs(e.Args[1:])
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Errorf("%s: %v\n%s", e, err, errOut.String())
		return
	}
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("%s: the output lacks %q:\n%s", e, w, out.String())
		}
	}
}

// The fleet page's fleet file is one sriov-lane reads, and its render and
// job examples, run here on it (they change nothing and need no host),
// print the objects and the job it describes.
func TestDocFleetExamples(t *testing.T) {
	const root = "../.."
	blocks, err := docexample.Blocks(filepath.Join(root, "docs/fleet.md"))
	if err != nil {
		t.Fatal(err)
	}
	var file string
	for _, b := range blocks {
		if b.Lang == "yaml" && strings.Contains(b.Text(), "kind: Fleet") {
			file = b.Text()
		}
	}
	if file == "" {
		t.Fatal("docs/fleet.md has no fleet file (a yaml block of kind Fleet)")
	}
	cases := []struct {
		e    docexample.Example
		want []string
	}{
		{docexample.Lookup(t, "sriov-lane fleet render --config fleet.yaml -o json"),
			[]string{`"kind": "DaemonSet"`, `"sriov-host-1": "{`, `"sriov-host-2": "{`, `0000:5e:00.1`, `"type\":\"host-device\"`}},
		{docexample.Lookup(t, "sriov-lane fleet job --config fleet.yaml"),
			[]string{"kind: Pod", "sriov-lane.io/pf: \"2\"", "image: quay.io/example/ci-image:latest", "k8s.v1.cni.cncf.io/networks: default/sriov-lane-pf, default/sriov-lane-pf"}},
		{docexample.Lookup(t, "sriov-lane fleet job --config fleet.yaml --prow"),
			[]string{"- always_run: false", "decorate: true", "name: sriov-lane-job", "privileged: true"}},
	}
	// The examples name fleet.yaml in the working directory.
	t.Chdir(t.TempDir())
	if err := os.WriteFile("fleet.yaml", []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		runExample(t, c.e, c.want)
	}
}
