// Package secretkey gets a random key that every replica of a component shares from a
// Secret, creating the Secret with a new random key when it does not exist yet. The API
// server is the lock: when replicas start together, one Create wins and the others read its
// key. Manifests therefore never ship a fixed key.
package secretkey
