package adminauth

import (
	"context"
	"fmt"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Reviewer asks the API server who presents a token and what they may do.
type Reviewer interface {
	// Authenticate returns the user token belongs to; ok is false when the API server does not
	// accept it. err is set only when no answer came back.
	Authenticate(ctx context.Context, token string) (u User, ok bool, err error)
	// Authorize reports whether u may verb the non-resource URL path.
	Authorize(ctx context.Context, u User, verb, path string) (bool, error)
}

// User is an authenticated identity, as a TokenReview returns it.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// KubeReviewer is a Reviewer that creates TokenReviews and SubjectAccessReviews. The caller's
// ServiceAccount needs `create` on tokenreviews.authentication.k8s.io and
// subjectaccessreviews.authorization.k8s.io (the built-in ClusterRole system:auth-delegator
// has exactly these).
type KubeReviewer struct {
	tokens authenticationclient.TokenReviewInterface
	access authorizationclient.SubjectAccessReviewInterface
}

// ReviewQPS and ReviewBurst limit the reviews a process sends, on a rate limiter of their own:
// requests with made-up tokens cannot spend the API budget of the process's real work.
const (
	ReviewQPS   = 10
	ReviewBurst = 20
)

// NewKubeReviewer returns a KubeReviewer for cfg; httpClient may be nil (one is made from cfg).
func NewKubeReviewer(cfg *rest.Config, httpClient *http.Client) (*KubeReviewer, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(ReviewQPS, ReviewBurst)
	if httpClient == nil {
		var err error
		if httpClient, err = rest.HTTPClientFor(cfg); err != nil {
			return nil, fmt.Errorf("review client: %w", err)
		}
	}
	authn, err := authenticationclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("TokenReview client: %w", err)
	}
	authz, err := authorizationclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("SubjectAccessReview client: %w", err)
	}
	return &KubeReviewer{tokens: authn.TokenReviews(), access: authz.SubjectAccessReviews()}, nil
}

// Authenticate creates a TokenReview for the API server's own audiences.
func (k *KubeReviewer) Authenticate(ctx context.Context, token string) (User, bool, error) {
	tr, err := k.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return User{}, false, fmt.Errorf("create TokenReview: %w", err)
	}
	if !tr.Status.Authenticated {
		return User{}, false, nil
	}
	u := User{Name: tr.Status.User.Username, UID: tr.Status.User.UID, Groups: tr.Status.User.Groups}
	if len(tr.Status.User.Extra) > 0 {
		u.Extra = make(map[string][]string, len(tr.Status.User.Extra))
		for k, v := range tr.Status.User.Extra {
			u.Extra[k] = v
		}
	}
	return u, true, nil
}

// Authorize creates a SubjectAccessReview for verb on the non-resource URL path.
func (k *KubeReviewer) Authorize(ctx context.Context, u User, verb, path string) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Name, UID: u.UID, Groups: u.Groups,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}}
	if len(u.Extra) > 0 {
		sar.Spec.Extra = make(map[string]authorizationv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			sar.Spec.Extra[k] = v
		}
	}
	res, err := k.access.Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("create SubjectAccessReview: %w", err)
	}
	// An evaluationError without allowed (RBAC: a binding names a missing role) is a refusal,
	// as the API server itself treats it; retrying would not change the answer.
	return res.Status.Allowed, nil
}
