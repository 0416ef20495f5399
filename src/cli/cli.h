/* cli: the `sluice` command. One file per sub-command; each gets argv after
 * the sub-command name (argv[0] is the sub-command) and returns the exit
 * status. The CLI uses the public API, plus data/ and ops/ internals for the
 * tools that write (pack, make-dataset). */
#ifndef SL_CLI_H
#define SL_CLI_H

int sl__cmd_pack(int argc, char **argv);
int sl__cmd_inspect(int argc, char **argv);
int sl__cmd_verify(int argc, char **argv);
int sl__cmd_index(int argc, char **argv);
int sl__cmd_run(int argc, char **argv); /* `run` and `bench` */
int sl__cmd_make_dataset(int argc, char **argv);
int sl__cmd_analyze(int argc, char **argv);
int sl__cmd_plot(int argc, char **argv);
int sl__cmd_top(int argc, char **argv);
int sl__cmd_tokenize(int argc, char **argv);
int sl__cmd_train_policy(int argc, char **argv);
int sl__cmd_text(int argc, char **argv);         /* run/bench --task */
int sl__cmd_pack_text(int argc, char **argv);    /* pack --text */
int sl__cmd_pack_volumes(int argc, char **argv); /* pack --volumes */
int sl__cmd_calibrate(int argc, char **argv);
int sl__cmd_simulate(int argc, char **argv);
int sl__cmd_volume(int argc, char **argv); /* volume info / list */

#endif
