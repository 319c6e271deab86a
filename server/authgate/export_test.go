package authgate

import "revd/journal"

// FailCommits makes every commit of s's gate fail with err from now on, as
// a journal that cannot be written does.
func FailCommits(s *Service, err error) {
	s.g.be.commit = func([]journal.AuthChange) error { return err }
}
