// Package membership tells a speaker which other speakers are alive, fast (hashicorp/memberlist
// with sub-second timers), and whether this speaker may announce at all (Quorum: the fencing rule
// that keeps a cut-off node from answering for addresses another node has taken).
package membership
