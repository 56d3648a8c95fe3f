// Package layers holds the test that keeps the README's code map true: the
// map puts every product package on a floor, and a package may import only
// packages on lower floors.
package layers

import (
	"bufio"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// root is the repository, two levels up from hack/layers.
const root = "../.."

// productDirs hold the packages that must stand on a floor.
var productDirs = []string{"pkg", "cmd"}

// mapRow is a row of README.md's "Where things are" table: its floor ("" for
// rows without one: manifests, hack, test) and the paths its path cell names.
type mapRow struct {
	floor string
	paths []string
}

// mapRows reads README.md's "Where things are" table.
func mapRows(t *testing.T) []mapRow {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile(`^\|\s*(\d*)\s*\|([^|]*)\|`)
	path := regexp.MustCompile("`([^`]+)`")
	var rows []mapRow
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Where things are"
			continue
		}
		m := row.FindStringSubmatch(line)
		if !in || m == nil {
			continue
		}
		r := mapRow{floor: m[1]}
		for _, p := range path.FindAllStringSubmatch(m[2], -1) {
			r.paths = append(r.paths, strings.TrimSuffix(p[1], "/"))
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// codeMap reads the floors of README.md's "Where things are" table: path
// (relative to the repository) -> floor. Rows without a floor (manifests,
// hack, test) are not layered.
func codeMap(t *testing.T) map[string]int {
	t.Helper()
	floors := map[string]int{}
	for _, r := range mapRows(t) {
		if r.floor == "" {
			continue
		}
		floor, _ := strconv.Atoi(r.floor)
		for _, p := range r.paths {
			floors[p] = floor
		}
	}
	if len(floors) == 0 {
		t.Fatal(`README.md has no "## Where things are" table with floors`)
	}
	return floors
}

func modulePath(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^module\s+(\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod names no module")
	}
	return string(m[1])
}

// packages lists the directories under dirs that hold non-test Go files,
// with the module's packages each imports (as repository paths). A
// directory with a go.mod of its own is another module and is skipped.
func packages(t *testing.T, module string, dirs []string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	for _, top := range dirs {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" {
					return filepath.SkipDir
				}
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil && p != root {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, filepath.Dir(p))
			rel = filepath.ToSlash(rel)
			imports := out[rel]
			for _, spec := range f.Imports {
				ip, _ := strconv.Unquote(spec.Path.Value)
				if own, ok := strings.CutPrefix(ip, module+"/"); ok {
					imports = append(imports, own)
				}
			}
			out[rel] = imports
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestNoImportClimbs(t *testing.T) {
	floors := codeMap(t)
	pkgs := packages(t, modulePath(t), productDirs)
	var names []string
	for p := range pkgs {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		floor, ok := floors[p]
		if !ok {
			t.Errorf("%s is not in README.md's code map (\"Where things are\"): give it a floor", p)
			continue
		}
		seen := map[string]bool{}
		for _, imp := range pkgs[p] {
			if seen[imp] {
				continue
			}
			seen[imp] = true
			to, ok := floors[imp]
			switch {
			case !ok:
				t.Errorf("%s imports %s, which stands on no floor (product code imports no test or hack package)", p, imp)
			case to >= floor:
				t.Errorf("%s (floor %d) imports %s (floor %d): a package imports only lower floors", p, floor, imp, to)
			}
		}
	}
	for p := range floors {
		if _, ok := pkgs[p]; !ok {
			t.Errorf("README.md's code map gives %s a floor, but it is no package with Go files", p)
		}
	}
}

// The test itself must catch what it is for.
func TestCodeMapParsesFloors(t *testing.T) {
	floors := codeMap(t)
	for p, want := range map[string]int{"pkg/cmd": 4, "pkg/lane": 3, "pkg/sriov": 2, "pkg/config": 1, "pkg/statedir": 0} {
		if got, ok := floors[p]; !ok || got != want {
			t.Errorf("floor of %s = %d, %v; want %d", p, got, ok, want)
		}
	}
	if _, ok := floors["test/e2e"]; ok {
		t.Error("rows without a floor must not be layered")
	}
}

// TestEveryTestPackageMapped: the test packages have no floors, but a
// newcomer looks for them in the same table, so each directory under
// test/ must be a row's path or lie under one.
func TestEveryTestPackageMapped(t *testing.T) {
	var rows []string
	for _, r := range mapRows(t) {
		rows = append(rows, r.paths...)
	}
	dirs, err := os.ReadDir(filepath.Join(root, "test"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		dir := "test/" + d.Name()
		mapped := false
		for _, r := range rows {
			mapped = mapped || dir == r || strings.HasPrefix(dir, r+"/")
		}
		if !mapped {
			t.Errorf("%s has no row in README.md's \"Where things are\" table", dir)
		}
	}
}
