/* test_routes_admit.c — what is refused on the headers alone, before a body is read. */
#include <criterion/criterion.h>

#include "routes.h"

static unsigned admit(const char *method, const char *path, bool has_body)
{
    struct api_request req = {.method = method, .path = path};
    struct api_response resp;
    int rc = api_route_admit(&req, has_body, &resp);
    unsigned status = rc ? resp.status : 0;
    cr_expect_eq(rc != 0, resp.body != NULL, "%s %s: an answer only with a refusal", method, path);
    json_decref(resp.body);
    return status;
}

Test(routes_admit, the_two_endpoints_that_take_a_body_admit_one)
{
    cr_expect_eq(admit("POST", "/jobs", true), 0);
    cr_expect_eq(admit("POST", "/jobs/0123456789abcdef/predict", true), 0);
}

Test(routes_admit, a_body_anywhere_else_is_413)
{
    static const char *const reqs[][2] = {
        {"GET", "/healthz"}, {"HEAD", "/version"}, {"GET", "/jobs"}, {"GET", "/jobs/0123456789abcdef"},
        {"DELETE", "/jobs/0123456789abcdef"}, {"POST", "/jobs/0123456789abcdef/cancel"},
        {"POST", "/jobs/0123456789abcdef/pause"}, {"GET", "/jobs/0123456789abcdef/metrics"},
    };
    for (size_t i = 0; i < sizeof reqs / sizeof *reqs; i++) {
        cr_expect_eq(admit(reqs[i][0], reqs[i][1], true), 413, "%s %s", reqs[i][0], reqs[i][1]);
        cr_expect_eq(admit(reqs[i][0], reqs[i][1], false), 0, "%s %s without a body", reqs[i][0], reqs[i][1]);
    }
}

Test(routes_admit, unknown_paths_are_404_and_wrong_methods_405_body_or_not)
{
    for (int body = 0; body < 2; body++) {
        cr_expect_eq(admit("POST", "/no/such/path", body), 404);
        cr_expect_eq(admit("POST", "/jobs/0123456789abcdef/nothing", body), 404);
        cr_expect_eq(admit("PUT", "/jobs", body), 405);
        cr_expect_eq(admit("POST", "/healthz", body), 405);
        cr_expect_eq(admit("GET", "/jobs/0123456789abcdef/predict", body), 405);
    }
}
