/* test_placement.c — which worker a job goes to, from the workers' names and the spec's device. */
#include <criterion/criterion.h>
#include <string.h>

#include "placement.h"

static struct job_spec spec_on(enum spec_device d, int index)
{
    struct job_spec s;
    memset(&s, 0, sizeof s);
    s.model = SPEC_MODEL_LINEAR;
    s.loss = NN_LOSS_MSE;
    s.device = d;
    s.device_index = index;
    return s;
}

static const char *const cpu_and_two_gpus[] = {"cpu:0", "cpu:1", "cuda:0", "cuda:1"};

Test(placement, cpu_job_takes_a_free_cpu_worker)
{
    struct job_spec s = spec_on(SPEC_DEVICE_CPU, 0);
    bool idle[] = {false, true, true, true};
    size_t w = 99;
    char why[128];
    cr_assert_eq(place_job(&s, cpu_and_two_gpus, idle, 4, &w, why, sizeof why), PLACE_OK);
    cr_expect_eq(w, 1);
}

Test(placement, cpu_job_waits_when_only_gpus_are_free)
{
    struct job_spec s = spec_on(SPEC_DEVICE_CPU, 0);
    bool idle[] = {false, false, true, true};
    size_t w;
    char why[128];
    cr_expect_eq(place_job(&s, cpu_and_two_gpus, idle, 4, &w, why, sizeof why), PLACE_WAIT);
}

Test(placement, cuda_job_takes_exactly_its_gpu)
{
    struct job_spec s = spec_on(SPEC_DEVICE_CUDA, 1);
    bool idle[] = {true, true, true, true};
    size_t w = 99;
    char why[128];
    cr_assert_eq(place_job(&s, cpu_and_two_gpus, idle, 4, &w, why, sizeof why), PLACE_OK);
    cr_expect_eq(w, 3);
}

Test(placement, cuda_job_waits_for_its_busy_gpu_even_when_another_is_free)
{
    struct job_spec s = spec_on(SPEC_DEVICE_CUDA, 0);
    bool idle[] = {true, true, false, true};
    size_t w;
    char why[128];
    cr_expect_eq(place_job(&s, cpu_and_two_gpus, idle, 4, &w, why, sizeof why), PLACE_WAIT);
}

Test(placement, cuda_job_without_that_gpu_fails_naming_the_count)
{
    static const char *const cpu_only[] = {"cpu"};
    struct job_spec s = spec_on(SPEC_DEVICE_CUDA, 0);
    bool idle[] = {true};
    size_t w;
    char why[128];
    cr_assert_eq(place_job(&s, cpu_only, idle, 1, &w, why, sizeof why), PLACE_NO_DEVICE);
    cr_expect_str_eq(why, "cuda:0: no such GPU (this machine has 0)");
    s.device_index = 2;
    cr_assert_eq(place_job(&s, cpu_and_two_gpus, (bool[]){true, true, true, true}, 4, &w, why, sizeof why),
                 PLACE_NO_DEVICE);
    cr_expect_str_eq(why, "cuda:2: no such GPU (this machine has 2)");
}

Test(placement, auto_prefers_a_free_gpu)
{
    struct job_spec s = spec_on(SPEC_DEVICE_AUTO, 0);
    bool idle[] = {true, true, false, true};
    size_t w = 99;
    char why[128];
    cr_assert_eq(place_job(&s, cpu_and_two_gpus, idle, 4, &w, why, sizeof why), PLACE_OK);
    cr_expect_eq(w, 3);
}

Test(placement, auto_falls_back_to_the_cpu_when_every_gpu_is_busy)
{
    struct job_spec s = spec_on(SPEC_DEVICE_AUTO, 0);
    bool idle[] = {false, true, false, false};
    size_t w = 99;
    char why[128];
    cr_assert_eq(place_job(&s, cpu_and_two_gpus, idle, 4, &w, why, sizeof why), PLACE_OK);
    cr_expect_eq(w, 1);
}

Test(placement, auto_runs_on_the_cpu_without_gpus)
{
    static const char *const cpu_only[] = {"cpu"};
    struct job_spec s = spec_on(SPEC_DEVICE_AUTO, 0);
    size_t w = 99;
    char why[128];
    cr_assert_eq(place_job(&s, cpu_only, (bool[]){true}, 1, &w, why, sizeof why), PLACE_OK);
    cr_expect_eq(w, 0);
}

/* The CUDA backend has every kernel: networks and the classification losses go to a GPU too. */
Test(placement, auto_puts_mlps_and_every_loss_on_a_free_gpu)
{
    struct job_spec s = spec_on(SPEC_DEVICE_AUTO, 0);
    bool idle[] = {true, true, false, true};
    const enum spec_model models[] = {SPEC_MODEL_LINEAR, SPEC_MODEL_MLP, SPEC_MODEL_LAYERS};
    const enum nn_loss_kind losses[] = {NN_LOSS_MSE, NN_LOSS_CROSS_ENTROPY, NN_LOSS_BCE_WITH_LOGITS};
    for (int m = 0; m < 3; m++)
        for (int l = 0; l < 3; l++) {
            s.model = models[m];
            s.loss = losses[l];
            size_t w = 99;
            char why[128];
            cr_assert_eq(place_job(&s, cpu_and_two_gpus, idle, 4, &w, why, sizeof why), PLACE_OK);
            cr_expect_eq(w, 3, "model %d loss %d went to worker %zu", m, l, w);
        }
}

Test(placement, gpu_worker_names_parse)
{
    int k = -1;
    cr_expect(place_is_gpu("cuda:12", &k));
    cr_expect_eq(k, 12);
    cr_expect_not(place_is_gpu("cpu", NULL));
    cr_expect_not(place_is_gpu("cuda:", NULL));
    cr_expect_not(place_is_gpu("cuda:1x", NULL));
}

/* A spec whose device is the list given: "cpu" or a GPU index each. */
static struct job_spec spec_on_list(int n, const int *gpu_or_cpu)
{
    struct job_spec s = spec_on(SPEC_DEVICE_LIST, 0);
    s.n_devices = n;
    for (int i = 0; i < n; i++)
        s.devices[i] = gpu_or_cpu[i] < 0 ? (struct spec_device_ref){SPEC_DEVICE_CPU, 0}
                                         : (struct spec_device_ref){SPEC_DEVICE_CUDA, gpu_or_cpu[i]};
    return s;
}
#define CPU (-1)

Test(placement, list_takes_the_first_free_device_in_list_order)
{
    struct job_spec s = spec_on_list(3, (int[]){1, CPU, 0});
    size_t w = 99;
    char why[128];
    cr_assert_eq(place_job(&s, cpu_and_two_gpus, (bool[]){true, true, true, true}, 4, &w, why, sizeof why),
                 PLACE_OK);
    cr_expect_eq(w, 3, "cuda:1 comes first in the list");
    cr_assert_eq(place_job(&s, cpu_and_two_gpus, (bool[]){false, true, true, false}, 4, &w, why, sizeof why),
                 PLACE_OK);
    cr_expect_eq(w, 1, "cuda:1 busy: the CPU is next");
    cr_assert_eq(place_job(&s, cpu_and_two_gpus, (bool[]){false, false, true, false}, 4, &w, why, sizeof why),
                 PLACE_OK);
    cr_expect_eq(w, 2, "cuda:1 and the CPUs busy: cuda:0");
}

Test(placement, list_never_uses_a_device_it_does_not_name)
{
    struct job_spec s = spec_on_list(1, (int[]){1});
    size_t w;
    char why[128];
    cr_expect_eq(place_job(&s, cpu_and_two_gpus, (bool[]){true, true, true, false}, 4, &w, why, sizeof why),
                 PLACE_WAIT);
}

Test(placement, list_of_cpu_takes_any_free_cpu_worker)
{
    static const char *const two_cpus[] = {"cpu:0", "cpu:1"};
    struct job_spec s = spec_on_list(1, (int[]){CPU});
    size_t w = 99;
    char why[128];
    cr_assert_eq(place_job(&s, two_cpus, (bool[]){false, true}, 2, &w, why, sizeof why), PLACE_OK);
    cr_expect_eq(w, 1);
    cr_expect_eq(place_job(&s, two_cpus, (bool[]){false, false}, 2, &w, why, sizeof why), PLACE_WAIT);
}

Test(placement, list_waits_while_one_of_its_gpus_exists_though_others_do_not)
{
    struct job_spec s = spec_on_list(2, (int[]){7, 0});
    size_t w;
    char why[128];
    cr_expect_eq(place_job(&s, cpu_and_two_gpus, (bool[]){true, true, false, true}, 4, &w, why, sizeof why),
                 PLACE_WAIT);
}

Test(placement, list_of_gpus_this_machine_lacks_fails_naming_them)
{
    struct job_spec s = spec_on_list(2, (int[]){2, 5});
    size_t w;
    char why[128];
    cr_assert_eq(place_job(&s, cpu_and_two_gpus, (bool[]){true, true, true, true}, 4, &w, why, sizeof why),
                 PLACE_NO_DEVICE);
    cr_expect_str_eq(why, "cuda:2, cuda:5: no such GPU (this machine has 2)");
}

Test(placement, list_puts_an_mlp_on_its_first_gpu_before_its_cpu)
{
    /* The CUDA backend trains every model and loss: a GPU listed first is not passed over. */
    struct job_spec s = spec_on_list(2, (int[]){0, CPU});
    s.model = SPEC_MODEL_MLP;
    s.loss = NN_LOSS_CROSS_ENTROPY;
    size_t w = 99;
    char why[128];
    cr_assert_eq(place_job(&s, cpu_and_two_gpus, (bool[]){true, true, true, true}, 4, &w, why, sizeof why),
                 PLACE_OK);
    cr_expect_eq(w, 2);
    cr_expect(place_allows(&s, "cuda:0"));
}

Test(placement, allows_says_which_workers_a_spec_may_use)
{
    struct job_spec s = spec_on_list(2, (int[]){1, CPU});
    cr_expect(place_allows(&s, "cuda:1"));
    cr_expect(place_allows(&s, "cpu:3"));
    cr_expect_not(place_allows(&s, "cuda:0"));
    s = spec_on(SPEC_DEVICE_CUDA, 0);
    cr_expect(place_allows(&s, "cuda:0"));
    cr_expect_not(place_allows(&s, "cpu"));
    s = spec_on(SPEC_DEVICE_CPU, 0);
    cr_expect_not(place_allows(&s, "cuda:0"));
    cr_expect(place_allows(&s, "cpu"));
}

/* Under mpirun: rank 0's workers, then rank 1's, named rankR/ and the device's name there. */
static const char *const two_ranks[] = {"cpu", "cuda:0", "rank1/cpu:0", "rank1/cuda:0", "rank1/cuda:1"};

Test(placement, another_ranks_gpu_is_a_gpu_of_its_index)
{
    int k = -1;
    cr_expect(place_is_gpu("rank1/cuda:1", &k));
    cr_expect_eq(k, 1);
    cr_expect_not(place_is_gpu("rank1/cpu:0", NULL));
    cr_expect_not(place_is_gpu("rank/cuda:0", NULL));
    cr_expect_not(place_is_gpu("rank1cuda:0", NULL));
}

Test(placement, one_named_gpu_is_rank_0s_even_when_a_follower_has_it_free)
{
    struct job_spec s = spec_on(SPEC_DEVICE_CUDA, 1);
    bool idle[] = {true, true, true, true, true};
    size_t w;
    char why[128];
    cr_assert_eq(place_job(&s, two_ranks, idle, 5, &w, why, sizeof why), PLACE_NO_DEVICE);
    cr_expect_str_eq(why, "cuda:1: no such GPU (this machine has 1)");
}

Test(placement, a_list_takes_its_gpus_on_any_rank)
{
    struct job_spec s = spec_on(SPEC_DEVICE_LIST, 0);
    s.n_devices = 1;
    s.devices[0] = (struct spec_device_ref){.kind = SPEC_DEVICE_CUDA, .index = 0};
    bool idle[] = {true, false, true, true, true};
    size_t w = 99;
    char why[128];
    cr_assert_eq(place_job(&s, two_ranks, idle, 5, &w, why, sizeof why), PLACE_OK);
    cr_expect_eq(w, 3, "rank 0's cuda:0 is busy: rank1/cuda:0, not worker %zu", w);
}

Test(placement, auto_takes_a_followers_gpu_as_a_gpu)
{
    struct job_spec s = spec_on(SPEC_DEVICE_AUTO, 0);
    bool idle[] = {true, false, true, false, true};
    size_t w = 99;
    char why[128];
    cr_assert_eq(place_job(&s, two_ranks, idle, 5, &w, why, sizeof why), PLACE_OK);
    cr_expect_eq(w, 4);
}
