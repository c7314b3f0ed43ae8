// Package uninstall tests `embedops cleanup` on the local kwok cluster,
// whose namespace and garbage collectors show whether anything is left
// stuck behind a finalizer.
package uninstall
