// Package docmap checks a package doc's file map: every package keeps in
// its doc.go a list of its files with what each holds, and a
// TestDocFileMap that calls Check. It imports nothing but the standard
// library, so the stand-in modules, which keep Docker's client (and so
// testutil) out of their graphs, use it too.
//
// Where things live (TestDocFileMap keeps this list true):
//   - docmap.go: Check, the test behind every package's TestDocFileMap
package docmap
