package docexample

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// UserDocs are the pages written for users, by path from the repository's
// root; hack/docs's TestDocExamples fails on a page of docs/ that is in
// neither this list nor its list of contributors' pages.
var UserDocs = []string{
	"README.md",
	"docs/README.md",
	"docs/lane.md",
	"docs/commands.md",
	"docs/ci.md",
	"docs/restarts.md",
	"docs/configuration.md",
	"docs/kubevirtci.md",
	"docs/podman.md",
	"docs/emulated-igb.md",
	"docs/fleet.md",
	"docs/troubleshooting.md",
}

// HostMark is what an example's comment says when only an SR-IOV host (or
// a host that can make one, with KVM) runs it: no test on the rig does.
const HostMark = "SR-IOV host"

// Example is one command of a user page's shell code block.
type Example struct {
	File    string // by path from the repository's root
	Line    int
	Command string   // as written, without its comment; continued lines joined
	Comment string   // after the command's '#', after the block's comment lines above it
	Env     []string // its leading NAME=value words
	Args    []string // the words after them, the command first, as sh splits them
}

func (e Example) String() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Command) }

// shellLangs are the info strings of a fenced block whose lines are
// commands; a block without one counts too.
var shellLangs = map[string]bool{"": true, "sh": true, "bash": true, "shell": true, "console": true}

// Read returns every example of the user pages under root, in page order.
func Read(root string) ([]Example, error) {
	var out []Example
	for _, page := range UserDocs {
		ex, err := readPage(root, page)
		if err != nil {
			return nil, err
		}
		out = append(out, ex...)
	}
	return out, nil
}

// Block is one fenced code block of a page.
type Block struct {
	Line  int      // the opening fence's
	Lang  string   // the fence's info string
	Lines []string // between the fences
}

// Text is the block's content, a newline after each line.
func (b Block) Text() string {
	var sb strings.Builder
	for _, l := range b.Lines {
		sb.WriteString(l)
		sb.WriteByte('\n')
	}
	return sb.String()
}

// Blocks returns the fenced code blocks of the Markdown file at path.
func Blocks(path string) ([]Block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Block
	var cur *Block
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &Block{Line: n, Lang: strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))}
		case cur != nil && trimmed == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.Lines = append(cur.Lines, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: the code block is not closed", path, cur.Line)
	}
	return out, nil
}

func readPage(root, page string) ([]Example, error) {
	blocks, err := Blocks(filepath.Join(root, page))
	if err != nil {
		return nil, err
	}
	var out []Example
	for _, b := range blocks {
		if !shellLangs[b.Lang] {
			continue
		}
		var pending *Example // a command continued with a trailing backslash
		var lead []string    // the block's comment lines so far: they say what follows
		for i, line := range b.Lines {
			cmd, comment := cutComment(strings.TrimSpace(line))
			cmd = strings.TrimPrefix(cmd, "$ ")
			if pending != nil {
				pending.Command += " " + strings.TrimSuffix(cmd, "\\")
				pending.Comment = joinComments(pending.Comment, comment)
				if !strings.HasSuffix(cmd, "\\") {
					out = append(out, finish(*pending))
					pending = nil
				}
				continue
			}
			if cmd == "" {
				if comment != "" {
					lead = append(lead, comment)
				}
				continue
			}
			e := Example{File: page, Line: b.Line + 1 + i, Command: strings.TrimSpace(strings.TrimSuffix(cmd, "\\")), Comment: joinComments(append(slices.Clone(lead), comment)...)}
			if strings.HasSuffix(cmd, "\\") {
				pending = &e
				continue
			}
			out = append(out, finish(e))
		}
		if pending != nil {
			return nil, fmt.Errorf("%s:%d: the continued command is not closed in its block", page, pending.Line)
		}
	}
	return out, nil
}

// joinComments joins the comments that are not empty.
func joinComments(cs ...string) string {
	return strings.Join(slices.DeleteFunc(cs, func(c string) bool { return c == "" }), " ")
}

// finish splits e's command into its environment and its words.
func finish(e Example) Example {
	e.Command = strings.Join(strings.Fields(e.Command), " ")
	words := Split(e.Command)
	for len(words) > 0 && isAssignment(words[0]) {
		e.Env = append(e.Env, words[0])
		words = words[1:]
	}
	e.Args = words
	return e
}

func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" {
		return false
	}
	for i, r := range name {
		if r != '_' && (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// cutComment splits a line at its first '#' that starts a word outside
// quotes, as sh does.
func cutComment(line string) (cmd, comment string) {
	if _, at := lex(line); at >= 0 {
		return strings.TrimSpace(line[:at]), strings.TrimSpace(line[at+1:])
	}
	return strings.TrimSpace(line), ""
}

// Split splits a command into words as sh does for the docs' examples:
// blanks separate words, and single and double quotes group them (no
// expansion; $VAR stays as written).
func Split(cmd string) []string {
	words, _ := lex(cmd)
	return words
}

// lex reads line as sh does for the docs' examples: its words, up to the
// first '#' that starts a word outside quotes, and where that '#' is (-1
// for none).
func lex(line string) (words []string, comment int) {
	var w strings.Builder
	inWord := false
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				w.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case r == '#' && !inWord:
			return words, i
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, -1
}

// Root is the repository's root: the nearest directory up from the working
// directory that holds go.mod and docs/.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "docs")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no repository root (go.mod and docs/) above the working directory")
		}
		dir = parent
	}
}

// Lookup returns the user pages' one example whose command is command, for
// the test that runs it; it fails t when there is none or more than one
// (hack/docs's TestDocExamples finds the tests that run an example by
// their Lookup calls, so command must be a string literal).
func Lookup(t testing.TB, command string) Example {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	all, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	var found []Example
	for _, e := range all {
		if e.Command == command {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("the user docs have %d examples %q, want 1 (this test runs it: change the test with the docs)", len(found), command)
	}
	return found[0]
}
