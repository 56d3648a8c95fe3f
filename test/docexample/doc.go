// Package docexample reads the command examples of the user docs: every
// line of their shell code blocks. hack/docs's TestDocExamples holds each
// to the CLI and to a test that runs it, unless the example says it needs
// an SR-IOV host; the tests that run an example take it from here
// (Lookup), so an example that changes or goes fails them. It imports
// nothing but the standard library.
//
// Where things live (TestDocFileMap keeps this list true):
//   - docexample.go: UserDocs, Example, Read, Lookup and the word splitting
package docexample
